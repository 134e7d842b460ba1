// Signing in: the server's browser sign-in (its default provider, or an organization's identity
// provider; an invite code is redeemed on the way), or — for an operator — a pasted token from
// `bulwark admin token`. And the callback page that finishes the browser sign-in.
import { useEffect, useState } from "react";
import { Auth } from "../../../src/gen/platform/auth/v1/auth.platform_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { beginSignIn, canSignInHere, finishSignIn, safeReturn, session } from "../session";
import { navigate, useLocation } from "../router";
import { Button, Form, TextArea, TextField } from "../ui/forms";
import { ErrorNote } from "../ui/feedback";
import { useAction } from "../ui/load";

export function SignInPage() {
  const { query } = useLocation();
  const [identityProvider, setIdentityProvider] = useState(query.get("identity_provider") ?? "");
  const [inviteCode, setInviteCode] = useState(query.get("invite_code") ?? "");
  const [token, setToken] = useState("");
  const returnTo = safeReturn(query.get("return") ?? undefined);
  const browser = useAction(() => beginSignIn({ identityProvider, inviteCode, returnTo }));
  const paste = useAction(async () => {
    const value = token.trim();
    // Checked with the server before it is kept: a wrong or expired token is refused here.
    const transport = createConnectTransport({
      baseUrl: location.origin,
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${value}`), next(req))],
    });
    const who = await createClient(Auth, transport).validate({});
    session.start(value, who.expiry ? timestampDate(who.expiry).getTime() : Date.now() + 3600_000);
    navigate(returnTo, { replace: true });
  });
  const ended = session.endedBecause();
  useEffect(() => {
    document.title = "Sign in · Bulwark";
  }, []);
  return (
    <main id="main" className="sign-in">
      <h1>Sign in to Bulwark</h1>
      {ended && (
        <p className="note note-warn" role="alert">
          {ended}
        </p>
      )}
      <section aria-labelledby="browser-sign-in">
        <h2 id="browser-sign-in">With your identity provider</h2>
        {!canSignInHere() && (
          <p className="note note-warn">
            Browsers allow this sign-in only over HTTPS or on localhost. Use HTTPS, or paste a token below.
          </p>
        )}
        <Form label="Sign in with your identity provider" onSubmit={browser.run}>
          {/* Open when a link filled them in: nothing chosen for the person stays out of sight. */}
          <details open={identityProvider !== "" || inviteCode !== ""}>
            <summary>Options: an organization&apos;s identity provider, an invite code</summary>
            <TextField
              label="Identity provider ID"
              hint="Leave empty for this server's sign-in provider."
              value={identityProvider}
              onValue={setIdentityProvider}
              autoComplete="off"
            />
            <TextField
              label="Invite code"
              hint="From an invite to an organization: you join it as you sign in."
              value={inviteCode}
              onValue={setInviteCode}
              autoComplete="off"
            />
          </details>
          <Button kind="primary" type="submit" busy={browser.busy} disabled={!canSignInHere()}>
            Sign in
          </Button>
          <ErrorNote error={browser.error} />
        </Form>
      </section>
      <section aria-labelledby="token-sign-in">
        <h2 id="token-sign-in">With a token</h2>
        <Form label="Sign in with a token" onSubmit={paste.run}>
          <TextArea
            label="API token"
            hint={
              <>
                For operators: the output of <code>bulwark admin token</code>. It stays in this tab only.
              </>
            }
            value={token}
            onValue={setToken}
            required
            secret
          />
          <Button type="submit" busy={paste.busy}>
            Use this token
          </Button>
          <ErrorNote error={paste.error} />
        </Form>
      </section>
    </main>
  );
}

export function CallbackPage() {
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    let live = true;
    finishSignIn(new URLSearchParams(location.search)).then(
      (next) => live && navigate(next, { replace: true }),
      (err: unknown) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, []);
  return (
    <main id="main" className="sign-in">
      <h1>Signing in…</h1>
      {error ? (
        <>
          <ErrorNote error={error} title="The sign-in did not finish" />
          <Button kind="primary" onClick={() => navigate("/console/sign-in", { replace: true })}>
            Sign in again
          </Button>
        </>
      ) : (
        <p role="status">Finishing the sign-in…</p>
      )}
    </main>
  );
}
