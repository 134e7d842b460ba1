// Page tokens: opaque and tamper-proof. They are JWTs encrypted with A256GCM under a key every
// replica shares (kept in the database), so any replica can continue a walk, and a client can
// neither read nor forge one. Lifetime 3 days; an expired token restarts the walk (see list.ts).
import { hkdfSync } from "node:crypto";
import { EncryptJWT, jwtDecrypt, errors as joseErrors } from "jose";

export const PAGE_TOKEN_LIFETIME_SECONDS = 3 * 24 * 60 * 60;

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
    const nowSeconds = Math.floor(this.now() / 1000);
    return new EncryptJWT({ o: cursor.order, f: cursor.filter, a: cursor.after, s: cursor.skipped })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setIssuedAt(nowSeconds)
      .setExpirationTime(nowSeconds + PAGE_TOKEN_LIFETIME_SECONDS)
      .encrypt(this.key);
  }

  async decode(token: string): Promise<DecodedToken> {
    try {
      const { payload } = await jwtDecrypt(token, this.key, {
        currentDate: new Date(this.now()),
        keyManagementAlgorithms: ["dir"],
        contentEncryptionAlgorithms: ["A256GCM"],
      });
      const { o, f, a, s } = payload as Record<string, unknown>;
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
      return { kind: "ok", cursor: { order: o, filter: f, after: a as string[], skipped: s } };
    } catch (err) {
      // Only an authentic token can fail its expiry check: decryption comes first.
      if (err instanceof joseErrors.JWTExpired) return { kind: "expired" };
      return { kind: "invalid" };
    }
  }
}
