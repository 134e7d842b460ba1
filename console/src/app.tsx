// The console's shell: signed out, the sign-in page; signed in, the caller's access (loaded once
// per token), the navigation, the page the URL names, and a notice as the token nears its end.
import { Component, useEffect, useState, useSyncExternalStore, type ReactNode } from "react";
import { AccessProvider, loadAccess } from "./access";
import { navigation, routeOf } from "./routes";
import { Link, href, navigate, useLocation } from "./router";
import { session } from "./session";
import { CallbackPage, SignInPage } from "./pages/sign-in";
import { useLoad } from "./ui/load";
import { ErrorNote, Loading } from "./ui/feedback";
import { Button } from "./ui/forms";
import type { NavItem } from "./pages/types";

const useSession = () => useSyncExternalStore(session.subscribe, session.current);

export function App() {
  const { path } = useLocation();
  const current = useSession();
  if (path === "/console/callback") return <CallbackPage />;
  if (path === "/console/sign-in" || !current) return <SignInGate />;
  return <SignedIn token={current.token} />;
}

/** Signed out on a console page: the sign-in, which returns here afterwards. */
function SignInGate() {
  const { path, query } = useLocation();
  useEffect(() => {
    if (path !== "/console/sign-in") {
      const here = `${path === "/" ? "/console" : path}${location.search}`;
      navigate(`/console/sign-in?return=${encodeURIComponent(here)}`, { replace: true });
    }
  }, [path]);
  void query;
  return <SignInPage />;
}

function SignedIn({ token }: { token: string }) {
  const access = useLoad(loadAccess, [token]);
  if (access.error) {
    return (
      <main id="main" className="sign-in">
        <h1>Bulwark</h1>
        <ErrorNote error={access.error} title="Your access could not be read" />
        <Button onClick={access.reload}>Try again</Button>
      </main>
    );
  }
  if (!access.data) return <Loading what="your access" />;
  return (
    <AccessProvider access={access.data} refresh={access.reload}>
      <Shell />
    </AccessProvider>
  );
}

function Shell() {
  const { path, query } = useLocation();
  const route = routeOf(path);
  const [menuOpen, setMenuOpen] = useState(false);
  // A new page: close the phone menu and move focus to the page's title for screen readers.
  useEffect(() => {
    setMenuOpen(false);
    document.getElementById("page-title")?.focus({ preventScroll: true });
  }, [path]);
  const sections = [...new Set(navigation.map((n) => n.section))];
  // The group chosen on a group-scoped page goes along to the other group-scoped pages.
  const group = navigation.find((n) => n.to === path)?.keepsGroup ? (query.get("group") ?? "") : "";
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/console" className="brand">
          Bulwark
        </Link>
        <button
          type="button"
          className="menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="site-nav"
          onClick={() => setMenuOpen((o) => !o)}
        >
          Menu
        </button>
        <ExpiryNotice />
        <Button
          onClick={() => {
            session.end("You signed out.");
            navigate("/console/sign-in", { replace: true });
          }}
        >
          Sign out
        </Button>
      </header>
      <nav id="site-nav" className={`sidebar${menuOpen ? " open" : ""}`} aria-label="Console">
        <ul>
          <li>
            <NavLink item={{ section: "Organization", label: "Overview", to: "/console" }} path={path} />
          </li>
        </ul>
        {sections.map((section) => (
          <div key={section}>
            <h2 className="nav-heading">{section}</h2>
            <ul>
              {navigation
                .filter((n) => n.section === section)
                .map((item) => (
                  <li key={item.to}>
                    <NavLink item={item} path={path} group={group} />
                  </li>
                ))}
            </ul>
          </div>
        ))}
      </nav>
      <main id="main" className="content">
        {route ? (
          // Keyed by the path: another page starts with a clean slate after a failure.
          <PageBoundary key={path}>{route.render()}</PageBoundary>
        ) : (
          <>
            <h1 id="page-title" tabIndex={-1}>
              Not found
            </h1>
            <p>
              There is no console page at <code>{path}</code>. <Link to="/console">Go to the overview</Link>.
            </p>
          </>
        )}
      </main>
    </div>
  );
}

function NavLink({ item, path, group = "" }: { item: NavItem; path: string; group?: string }) {
  const current = path === item.to || (path === "/" && item.to === "/console");
  return (
    <Link to={item.keepsGroup ? href(item.to, { group }) : item.to} aria-current={current ? "page" : undefined}>
      {item.label}
    </Link>
  );
}

/** Warns in the token's last 10 minutes (the session ends itself at the end: session.ts). */
function ExpiryNotice() {
  const current = useSyncExternalStore(session.subscribe, session.current);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 15_000);
    return () => clearInterval(timer);
  }, []);
  if (!current) return null;
  const minutes = Math.max(0, Math.ceil((current.expiresAt - now) / 60_000));
  if (minutes > 10) return <span className="expiry" />;
  return (
    <span className="expiry note-warn" role="status">
      Session ends in {minutes} min.{" "}
      <Link to={`/console/sign-in?return=${encodeURIComponent(location.pathname + location.search)}`}>
        Sign in again
      </Link>
    </span>
  );
}

/**
 * A page that throws while rendering shows what went wrong, in words, with the navigation still
 * there; around the whole console (main.tsx) it catches what the shell itself throws. Never a
 * blank page.
 */
export class PageBoundary extends Component<{ children: ReactNode }, { error?: unknown }> {
  override state: { error?: unknown } = {};

  static getDerivedStateFromError(error: unknown) {
    return { error };
  }

  override render() {
    if (this.state.error === undefined) return this.props.children;
    return (
      <>
        <h1 id="page-title" tabIndex={-1}>
          This page failed
        </h1>
        <ErrorNote error={this.state.error} />
        <p>
          <Button onClick={() => this.setState({ error: undefined })}>Try again</Button>{" "}
          <Link to="/console">Go to the overview</Link>
        </p>
      </>
    );
  }
}
