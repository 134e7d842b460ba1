// What sign-in shows people and answers the CLI: its HTML pages, every text in them escaped, and
// OAuth's JSON replies, never cached.
import type { FastifyReply } from "fastify";
import type { LoginError } from "./errors.js";
import type { DeviceAuthorizationResponse, TokenResponse } from "./service.js";

/** Text made safe for HTML content and quoted attribute values. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A whole page; `body` is HTML whose texts the caller has escaped. */
function page(reply: FastifyReply, status: number, title: string, body: string): FastifyReply {
  const heading = escapeHtml(title);
  const head = `<meta charset="utf-8"><title>${heading}</title>`;
  const style = "font-family:sans-serif;max-width:36em;margin:4em auto";
  const html =
    `<!doctype html><html><head>${head}</head>` + `<body style="${style}"><h1>${heading}</h1>${body}</body></html>`;
  return (
    reply
      .code(status)
      .header("content-type", "text/html; charset=utf-8")
      .header("cache-control", "no-store")
      // No form-action: the device confirmation's POST continues (by redirect) to the upstream's
      // origin, which browsers would block under form-action 'self'.
      .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'")
      .header("x-frame-options", "DENY")
      .send(html)
  );
}

/** A sign-in that cannot go on, and why. */
export function failurePage(reply: FastifyReply, status: number, reason: string): FastifyReply {
  return page(reply, status, "Sign-in failed", `<p>${escapeHtml(reason)}</p>`);
}

export function signedInPage(reply: FastifyReply): FastifyReply {
  return page(reply, 200, "Signed in", "<p>You are signed in. Return to your terminal.</p>");
}

/** Device flow: where a person types the code their terminal shows. */
export function userCodeEntryPage(reply: FastifyReply): FastifyReply {
  return page(
    reply,
    200,
    "Sign in a device",
    `<form method="get" action="device"><p>Enter the code shown in your terminal:</p>` +
      `<p><input name="user_code" autocomplete="off" autofocus></p>` +
      `<p><button type="submit">Continue</button></p></form>`,
  );
}

/** Device flow: the code to confirm, and the form that confirms it (its CSRF token included). */
export function deviceConfirmationPage(
  reply: FastifyReply,
  code: { userCode: string; shown: string; csrf: string },
): FastifyReply {
  const [shown, userCode, csrf] = [code.shown, code.userCode, code.csrf].map(escapeHtml);
  return page(
    reply,
    200,
    "Sign in a device",
    `<p>A device is asking to sign in as you with the code</p>` +
      `<p style="font-size:2em;letter-spacing:.2em"><b>${shown}</b></p>` +
      `<p>Continue only if this is the code shown on your own device.</p>` +
      `<form method="post" action="device"><input type="hidden" name="user_code" value="${userCode}">` +
      `<input type="hidden" name="csrf" value="${csrf}"><button type="submit">Sign in this device</button></form>`,
  );
}

/** An OAuth error reply (RFC 6749 §5.2): 401 for an unknown client, else 400. */
export function oauthErrorReply(reply: FastifyReply, err: LoginError): FastifyReply {
  const status = err.oauthError === "invalid_client" ? 401 : 400;
  return reply
    .code(status)
    .header("cache-control", "no-store")
    .header("pragma", "no-cache")
    .send({ error: err.oauthError, error_description: err.message });
}

export function deviceAuthorizationReply(reply: FastifyReply, body: DeviceAuthorizationResponse): FastifyReply {
  return reply.header("cache-control", "no-store").send(body);
}

export function tokenReply(reply: FastifyReply, body: TokenResponse): FastifyReply {
  return reply.header("cache-control", "no-store").header("pragma", "no-cache").send(body);
}
