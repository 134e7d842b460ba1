// Sign-in's HTTP endpoints for `bulwark auth login`: each reads its request, asks the sign-in
// service (service.ts) and renders the outcome (views.ts). Every one is public: the OAuth protocol
// itself (client id, PKCE, state, codes) is how these requests are authenticated.
import type { CallContext } from "../../core/service.js";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { PlainRouter } from "../../platform/routes.js";
import { LoginError } from "./errors.js";
import { formatUserCode, normalizeUserCode, randomToken, sameText, SignInService, type LoginDeps } from "./service.js";
import * as views from "./views.js";

const CALLBACK_PATH = "/oauth/callback";
const DEVICE_PATH = "/device";
/** Carries the device confirmation's CSRF token beside the form's copy. */
const DEVICE_CSRF_COOKIE = "bulwark_device_csrf";

type Handler = (request: FastifyRequest, reply: FastifyReply, call: CallContext) => Promise<unknown>;

export function registerLoginRoutes(router: PlainRouter, deps: LoginDeps): void {
  router.acceptForms();
  const base = () => deps.issuer.urls.issuer.replace(/\/$/, "");
  const service = new SignInService(deps, {
    callback: () => `${base()}${CALLBACK_PATH}`,
    device: () => `${base()}${DEVICE_PATH}`,
  });
  // Endpoints that take codes a caller could guess (device codes, user codes, authorization
  // codes) are `sensitive`: stricter rate limits.
  const get = (url: string, handler: Handler) => router.route({ method: "GET", url, access: "public", handler });
  const sensitivePost = (url: string, handler: Handler) =>
    router.route({ method: "POST", url, access: "public", handler, sensitive: true });

  // The CLI's authorization request.
  get("/oauth/authorize", async (request, reply) => {
    const outcome = await service.authorize(queryOf(request));
    if (outcome.kind === "refused") return views.failurePage(reply, 400, outcome.reason);
    return reply.redirect(outcome.url, 302);
  });

  // The upstream provider's redirect back to us.
  get(CALLBACK_PATH, async (request, reply, call) => {
    const outcome = await service.returnFromUpstream(queryOf(request), call);
    switch (outcome.kind) {
      case "unknown_session":
        return views.failurePage(
          reply,
          400,
          "This sign-in is unknown, expired or already finished. Start again from your terminal.",
        );
      case "redirect":
        return reply.redirect(outcome.url, 302);
      case "device_signed_in":
        return views.signedInPage(reply);
      case "device_failed":
        return views.failurePage(reply, 400, outcome.reason);
    }
  });

  // Device flow: the CLI asks for a user code (RFC 8628 §3.1).
  sensitivePost("/oauth/device_authorization", async (request, reply) => {
    try {
      return views.deviceAuthorizationReply(reply, await service.startDevice(formOf(request)));
    } catch (err) {
      if (err instanceof LoginError) return views.oauthErrorReply(reply, err);
      throw err;
    }
  });

  // Device flow: the person, in a browser, enters the user code, then confirms it (RFC 8628 §5.4:
  // a link carrying someone else's code must not sign that device in with one click). The
  // confirmation is a POST carrying a token that must match a SameSite=Strict cookie, so another
  // site cannot submit it.
  get(DEVICE_PATH, async (request, reply) => {
    const typed = queryOf(request).user_code;
    if (typeof typed !== "string" || typed === "") return views.userCodeEntryPage(reply);
    const userCode = normalizeUserCode(typed);
    const csrf = randomToken(24);
    reply.header("set-cookie", `${DEVICE_CSRF_COOKIE}=${csrf}; Path=/; HttpOnly; SameSite=Strict; Max-Age=600`);
    return views.deviceConfirmationPage(reply, { userCode, shown: formatUserCode(userCode), csrf });
  });

  sensitivePost(DEVICE_PATH, async (request, reply) => {
    const form = formOf(request);
    const cookie = cookieValue(request.headers.cookie, DEVICE_CSRF_COOKIE);
    if (!cookie || typeof form.csrf !== "string" || !sameText(cookie, form.csrf)) {
      return views.failurePage(reply, 400, "Please start again from the code entry page.");
    }
    const outcome = await service.confirmDevice(form.user_code ?? "");
    switch (outcome.kind) {
      case "unknown_code":
        return views.failurePage(reply, 400, "That code is unknown, expired or already used.");
      case "redirect":
        return reply.redirect(outcome.url, 302);
      case "failed":
        return views.failurePage(reply, 502, outcome.reason);
    }
  });

  // The token endpoint: codes and device codes for API tokens (RFC 6749 §4.1.3, RFC 8628 §3.4).
  sensitivePost("/oauth/token", async (request, reply) => {
    try {
      return views.tokenReply(reply, await service.token(formOf(request)));
    } catch (err) {
      if (err instanceof LoginError) return views.oauthErrorReply(reply, err);
      throw err;
    }
  });
}

function queryOf(request: FastifyRequest): Record<string, unknown> {
  return request.query as Record<string, unknown>;
}

/** The form this scope's parser made of the body (empty without one). */
function formOf(request: FastifyRequest): Record<string, string> {
  const body = request.body;
  return body && typeof body === "object" ? (body as Record<string, string>) : {};
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return undefined;
}
