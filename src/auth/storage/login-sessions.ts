// Sign-in attempts (see migration 004). Every state change is one conditional UPDATE, so a
// replayed upstream callback, a replayed authorization code or two pollers racing for one device
// code each find the row already moved on.
import { createHash } from "node:crypto";
import type { Selectable } from "kysely";
import type { Db } from "../../storage/db.js";
import { authDb, type AuthDb, type LoginSessionsTable } from "./schema.js";

export type LoginSession = Selectable<LoginSessionsTable>;

export function codeHash(code: string): Buffer {
  return createHash("sha256").update(code, "utf8").digest();
}

export interface NewLoginSession {
  id: string;
  kind: "browser" | "device";
  clientRedirectUri?: string;
  clientState?: string;
  codeChallenge?: string;
  deviceCode?: string;
  userCode?: string;
  identityProviderUid?: string;
  inviteUid?: string;
  nonce: string;
  verifier: string;
  now: Date;
  expiresAt: Date;
}

export type DevicePoll =
  | { kind: "pending" }
  | { kind: "slow_down" }
  | { kind: "expired" }
  | { kind: "denied"; error: string }
  | { kind: "signed_in"; identityUid: string }
  | { kind: "unknown" };

export class LoginSessionsRepository {
  private readonly db: AuthDb;

  constructor(db: Db) {
    this.db = authDb(db);
  }

  async create(s: NewLoginSession): Promise<void> {
    await this.db
      .insertInto("login_sessions")
      .values({
        id: s.id,
        kind: s.kind,
        client_redirect_uri: s.clientRedirectUri ?? null,
        client_state: s.clientState ?? null,
        code_challenge: s.codeChallenge ?? null,
        code_hash: null,
        device_code_hash: s.deviceCode ? codeHash(s.deviceCode) : null,
        user_code: s.userCode ?? null,
        last_poll_time: null,
        identity_provider_uid: s.identityProviderUid ?? null,
        invite_uid: s.inviteUid ?? null,
        upstream_nonce: s.nonce,
        upstream_verifier: s.verifier,
        identity_uid: null,
        error: null,
        create_time: s.now,
        expire_time: s.expiresAt,
      })
      .execute();
  }

  /** A session still waiting for its upstream sign-in. */
  pending(id: string, now: Date): Promise<LoginSession | undefined> {
    return this.db
      .selectFrom("login_sessions")
      .selectAll()
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("expire_time", ">", now)
      .executeTakeFirst();
  }

  /** A device session by the code the user typed, claimed for one upstream sign-in. */
  async claimUserCode(userCode: string, now: Date): Promise<LoginSession | undefined> {
    return this.db
      .updateTable("login_sessions")
      .set({ upstream_started: true })
      .where("user_code", "=", userCode)
      .where("kind", "=", "device")
      .where("status", "=", "pending")
      .where("upstream_started", "=", false)
      .where("expire_time", ">", now)
      .returningAll()
      .executeTakeFirst();
  }

  /** pending → signed_in, once; a browser session gets its one-time code (valid until `code.expiresAt`). */
  async complete(
    id: string,
    identityUid: string,
    now: Date,
    code?: { value: string; expiresAt: Date },
  ): Promise<boolean> {
    const row = await this.db
      .updateTable("login_sessions")
      .set({
        status: "signed_in",
        identity_uid: identityUid,
        ...(code ? { code_hash: codeHash(code.value), expire_time: code.expiresAt } : {}),
      })
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("expire_time", ">", now)
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }

  async fail(id: string, error: string): Promise<void> {
    await this.db
      .updateTable("login_sessions")
      .set({ status: "failed", error })
      .where("id", "=", id)
      .where("status", "=", "pending")
      .execute();
  }

  /** Spends a browser session's authorization code: signed_in → used, once, before it expires. */
  redeemCode(code: string, now: Date): Promise<LoginSession | undefined> {
    return this.db
      .updateTable("login_sessions")
      .set({ status: "used" })
      .where("code_hash", "=", codeHash(code))
      .where("kind", "=", "browser")
      .where("status", "=", "signed_in")
      .where("expire_time", ">", now)
      .returningAll()
      .executeTakeFirst();
  }

  /** One poll of the device flow (RFC 8628 §3.5). */
  async pollDevice(deviceCode: string, now: Date, intervalMs: number): Promise<DevicePoll> {
    const row = await this.db
      .selectFrom("login_sessions")
      .selectAll()
      .where("device_code_hash", "=", codeHash(deviceCode))
      .executeTakeFirst();
    if (!row || row.kind !== "device") return { kind: "unknown" };
    if (row.status === "used") return { kind: "unknown" };
    if (row.expire_time <= now) return { kind: "expired" };
    if (row.status === "failed") return { kind: "denied", error: row.error ?? "sign-in failed" };
    if (row.status === "signed_in") {
      const spent = await this.db
        .updateTable("login_sessions")
        .set({ status: "used" })
        .where("id", "=", row.id)
        .where("status", "=", "signed_in")
        .returning("identity_uid")
        .executeTakeFirst();
      return spent?.identity_uid ? { kind: "signed_in", identityUid: spent.identity_uid } : { kind: "unknown" };
    }
    const tooSoon = row.last_poll_time !== null && now.getTime() - row.last_poll_time.getTime() < intervalMs;
    await this.db.updateTable("login_sessions").set({ last_poll_time: now }).where("id", "=", row.id).execute();
    return tooSoon ? { kind: "slow_down" } : { kind: "pending" };
  }

  async prune(now: Date): Promise<void> {
    await this.db
      .deleteFrom("login_sessions")
      .where("expire_time", "<", new Date(now.getTime() - 24 * 3600_000))
      .execute();
  }
}
