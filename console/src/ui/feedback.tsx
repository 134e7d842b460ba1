// How outcomes are shown: the server's refusal in its own words (role="alert", so screen readers
// announce it), a loading line, an empty list, a confirmation of what just happened.
import type { ReactNode } from "react";
import { problemOf } from "../api";

export function ErrorNote({ error, title }: { error: unknown; title?: string }) {
  if (error === undefined || error === null) return null;
  const problem = problemOf(error);
  return (
    <div className="note note-error" role="alert">
      {title && <strong>{title}: </strong>}
      <span data-testid="server-error">{problem.message}</span>
      {problem.fields.length > 0 && (
        <ul>
          {problem.fields.map((f, i) => (
            <li key={`${i}:${f.field}`}>
              <code>{f.field}</code>: {f.description}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Loading({ what }: { what?: string }) {
  return (
    <p className="muted" role="status">
      Loading{what ? ` ${what}` : ""}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="muted empty">{children}</p>;
}

/** A line saying what just happened (polite live region). */
export function Done({ children }: { children?: ReactNode }) {
  return (
    <p className="note note-ok" role="status">
      {children}
    </p>
  );
}
