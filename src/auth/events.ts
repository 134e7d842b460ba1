// What authentication records in the audit trail (our own documented types, docs/EVENTS.md):
// sign-ins, token exchanges, registry logins and refused credentials. A body says what happened
// and from where — issuer, audience, identity, the reason in words, remote address, user agent —
// never a token, code or password.
import { Code, ConnectError } from "@connectrpc/connect";
import type { CallContext } from "../core/service.js";
import type { EventJournal } from "../platform/events.js";

export const SIGNED_IN_EVENT = "dev.bulwark.auth.signed_in.v1";
export const TOKEN_EXCHANGED_EVENT = "dev.bulwark.auth.token_exchanged.v1";
export const REGISTRY_LOGIN_EVENT = "dev.bulwark.auth.registry_login.v1";
export const CREDENTIALS_REFUSED_EVENT = "dev.bulwark.auth.credentials_refused.v1";

/** Where a request came from, as every auth event's body tells it. */
export type Origin = Pick<CallContext, "headers" | "clientAddress">;

function originOf(call: Origin) {
  return { remote_address: call.clientAddress ?? "", user_agent: call.headers.get("user-agent") ?? "" };
}

export class AuthEvents {
  constructor(private readonly journal: EventJournal) {}

  /** A person finished signing in through an upstream provider (browser or device flow). */
  signedIn(
    call: Origin,
    s: { identity: string; issuer: string; subject: string; email: string; identityProvider?: string; group?: string },
  ): Promise<void> {
    return this.journal.record({
      type: SIGNED_IN_EVENT,
      subject: s.identity,
      group: s.group,
      actor: { subject: s.identity, act: { iss: s.issuer, sub: s.subject, ...(s.email ? { email: s.email } : {}) } },
      body: {
        identity: s.identity,
        issuer: s.issuer,
        subject: s.subject,
        email: s.email,
        identity_provider: s.identityProvider ?? "",
        ...originOf(call),
      },
      traceparent: call.headers.get("traceparent") ?? undefined,
    });
  }

  /** A presented token was exchanged for one of ours (the STS exchange, or a registry password). */
  tokenExchanged(
    call: Origin,
    e: { type?: string; identity: string; audience: string[]; act?: Readonly<Record<string, string>>; group?: string },
  ): Promise<void> {
    return this.journal.record({
      type: e.type ?? TOKEN_EXCHANGED_EVENT,
      subject: e.identity,
      group: e.group,
      actor: { subject: e.identity, ...(e.act ? { act: e.act } : {}) },
      body: {
        identity: e.identity,
        issuer: e.act?.iss ?? "",
        audience: e.audience,
        ...originOf(call),
      },
      traceparent: call.headers.get("traceparent") ?? undefined,
    });
  }

  /**
   * Credentials that reached verification and were refused (a bad, expired or foreign token, a
   * denied exchange): spends the call's failed-authentication budgets, and records the refusal
   * only if it is still answered as one. Past the limit the answer is its RESOURCE_EXHAUSTED and
   * nothing is recorded, so a flood of bad credentials cannot fill the audit trail (the limit's
   * metrics and the request log count it). Answers the error to throw.
   *
   * The event's subject is whom they claimed to be — a claim anyone can make, so the event
   * belongs to no group (operators see it in the audit trail; no tenant is sent noise).
   */
  async credentialsRefused(call: CallContext, audience: string, err: unknown): Promise<unknown> {
    const answer = call.failureBudget ? call.failureBudget.charge(err, call) : err;
    if (answer !== err) return answer;
    const claimed = call.claimedPrincipal ?? "";
    await this.journal.record({
      type: CREDENTIALS_REFUSED_EVENT,
      subject: claimed,
      actor: claimed ? { subject: claimed } : undefined,
      body: {
        claimed_subject: claimed,
        audience,
        reason: err instanceof ConnectError ? err.rawMessage : "the credentials could not be verified",
        ...originOf(call),
      },
      traceparent: call.headers.get("traceparent") ?? undefined,
    });
    return err;
  }
}

/** Whether a failed authentication is a refusal of presented credentials (not a limit, not a fault). */
export function isRefusal(err: unknown): boolean {
  return err instanceof ConnectError && (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied);
}
