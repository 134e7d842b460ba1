// Page tokens: opaque and tamper-proof. They are JWTs encrypted with A256GCM under a key every
// replica shares (kept in the database), so any replica can continue a walk, and a client can
// neither read nor forge one. Lifetime 3 days; an expired token restarts the walk (see list.ts).
import { hkdfSync } from "node:crypto";
import { EncryptJWT, jwtDecrypt, errors as joseErrors } from "jose";
import { LruCache } from "./lru.js";

export const PAGE_TOKEN_LIFETIME_SECONDS = 3 * 24 * 60 * 60;
/**
 * A token minted this recently for the same cursor is handed out again instead of encrypting a
 * new one (encryption was a tenth of a List request's time); it lives this much less at most.
 */
const REUSE_SECONDS = 60;
const CACHE_ENTRIES = 10_000;

export interface PageCursor {
  /** canonical order_by the walk uses */
  order: string;
  /** fingerprint of the request's filters */
  filter: string;
  /** sort-key values of the last row returned */
  after: string[];
  /** results skipped so far in this walk */
  skipped: number;
}

export type DecodedToken = { kind: "ok"; cursor: PageCursor } | { kind: "expired" } | { kind: "invalid" };

export class PageTokenCodec {
  /** recently minted tokens by cursor */
  readonly #minted = new LruCache<string, { token: string; mintedAt: number }>(CACHE_ENTRIES);
  /** recently decoded tokens, with their expiry (ms) */
  readonly #decoded = new LruCache<string, { cursor: PageCursor; expiresAt: number }>(CACHE_ENTRIES);

  private constructor(
    private readonly key: Uint8Array,
    private readonly now: () => number,
  ) {}

  /** Derives the AEAD key from a shared secret. */
  static fromSecret(secret: Uint8Array, now: () => number = Date.now): PageTokenCodec {
    const key = new Uint8Array(hkdfSync("sha256", secret, "bulwark", "page-token/v1", 32));
    return new PageTokenCodec(key, now);
  }

  async encode(cursor: PageCursor): Promise<string> {
    const now = this.now();
    const key = JSON.stringify([cursor.order, cursor.filter, cursor.after, cursor.skipped]);
    const recent = this.#minted.get(key);
    if (recent && now - recent.mintedAt < REUSE_SECONDS * 1000 && now >= recent.mintedAt) return recent.token;
    const nowSeconds = Math.floor(now / 1000);
    const token = await new EncryptJWT({ o: cursor.order, f: cursor.filter, a: cursor.after, s: cursor.skipped })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setIssuedAt(nowSeconds)
      .setExpirationTime(nowSeconds + PAGE_TOKEN_LIFETIME_SECONDS)
      .encrypt(this.key);
    this.#minted.set(key, { token, mintedAt: now });
    return token;
  }

  async decode(token: string): Promise<DecodedToken> {
    // Only authentic tokens are remembered, each until its expiry.
    const known = this.#decoded.get(token);
    if (known && this.now() < known.expiresAt) return { kind: "ok", cursor: known.cursor };
    const decoded = await this.decodeNow(token);
    if (decoded.kind === "ok") this.#decoded.set(token, decoded);
    return decoded.kind === "ok" ? { kind: "ok", cursor: decoded.cursor } : decoded;
  }

  private async decodeNow(
    token: string,
  ): Promise<{ kind: "ok"; cursor: PageCursor; expiresAt: number } | { kind: "expired" } | { kind: "invalid" }> {
    try {
      const { payload } = await jwtDecrypt(token, this.key, {
        currentDate: new Date(this.now()),
        keyManagementAlgorithms: ["dir"],
        contentEncryptionAlgorithms: ["A256GCM"],
      });
      const { o, f, a, s, exp } = payload as Record<string, unknown>;
      if (
        typeof o !== "string" ||
        typeof f !== "string" ||
        typeof s !== "number" ||
        !Number.isInteger(s) ||
        s < 0 ||
        !Array.isArray(a) ||
        !a.every((v) => typeof v === "string")
      ) {
        return { kind: "invalid" };
      }
      const cursor = Object.freeze({
        order: o,
        filter: f,
        after: Object.freeze([...(a as string[])]) as string[],
        skipped: s,
      });
      return { kind: "ok", cursor, expiresAt: (typeof exp === "number" ? exp : 0) * 1000 };
    } catch (err) {
      // Only an authentic token can fail its expiry check: decryption comes first.
      if (err instanceof joseErrors.JWTExpired) return { kind: "expired" };
      return { kind: "invalid" };
    }
  }
}
