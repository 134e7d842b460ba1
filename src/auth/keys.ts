// The issuer's ES256 signing keys, kept in the database so every replica signs and verifies
// with the same set. Rotation: a key signs for SIGNING_WINDOW_MS (24 h), then stays published until every
// token it could have signed has expired. Private keys never leave this module and the database, and
// are stored only sealed (a JWE under the database's key-encryption key, for the key's kid).
import { randomUUID } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from "jose";
import { sql } from "kysely";
import { SecretBox } from "../core/secret-box.js";
import { keyEncryptionKeyOf, type Db } from "../storage/db.js";
import { authDb, type AuthDb } from "./storage/schema.js";

export const ALGORITHM = "ES256";
export const SIGNING_WINDOW_MS = 24 * 60 * 60 * 1000;
/** The longest lifetime of any token we issue. */
export const MAX_TOKEN_LIFETIME_MS = 60 * 60 * 1000;
/**
 * A key is replaced this long before its signing window ends. The server refreshes more often
 * than that, so its key (and the embedded mode's key file) always has this much time left.
 */
export const ROTATE_BEFORE_MS = 15 * 60 * 1000;
export const REFRESH_EVERY_MS = 5 * 60 * 1000;
/** How long a verifier may trust its cached key set before asking the database again. */
const KEY_CACHE_MS = 30_000;
/** Refresh at most this often when a token names a kid we do not know. */
const UNKNOWN_KID_COOLDOWN_MS = 5_000;

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey | Uint8Array;
  signUntil: Date;
}

export interface PublishedKey {
  kid: string;
  jwk: JWK;
}

/**
 * The current signing key as a file (mode 0600) inside the embedded database's data directory.
 * An embedded database is open in one process only, so `bulwark admin token` signs with this
 * file while the server runs. The private key is sealed as in the database (`privateKeyJwe`, under
 * the data directory's key-encryption key, for the kid).
 */
export interface KeyFile {
  kid: string;
  privateKeyJwe: string;
  signUntil: string;
}

/** The private key sealed for storage: a JWE under the key-encryption key, bound to the kid. */
function sealPrivateJwk(box: SecretBox, kid: string, jwk: JWK): Promise<string> {
  return box.encrypt(JSON.stringify(jwk), kid);
}

async function unsealPrivateJwk(box: SecretBox, kid: string, jwe: string): Promise<JWK> {
  try {
    return JSON.parse(await box.decrypt(jwe, kid)) as JWK;
  } catch (err) {
    throw new Error(
      `cannot unseal signing key ${kid}: it was sealed with another key-encryption key than this one ` +
        `(BULWARK_KEY_ENCRYPTION_KEY on PostgreSQL, the data directory's key-encryption-key file otherwise)`,
      { cause: err },
    );
  }
}

/** The key in a key file written by KeyManager; undefined when absent, unreadable or of another key-encryption key. */
export async function readKeyFile(path: string, keyEncryptionKey: Uint8Array): Promise<SigningKey | undefined> {
  try {
    const f = JSON.parse(await readFile(path, "utf8")) as Partial<KeyFile>;
    if (typeof f.kid !== "string" || typeof f.privateKeyJwe !== "string" || typeof f.signUntil !== "string")
      return undefined;
    const jwk = await unsealPrivateJwk(new SecretBox(keyEncryptionKey), f.kid, f.privateKeyJwe);
    return { kid: f.kid, privateKey: await importJWK(jwk, ALGORITHM), signUntil: new Date(f.signUntil) };
  } catch {
    return undefined;
  }
}

export class KeyManager {
  #published: { keys: PublishedKey[]; loadedAt: number } | undefined;
  #lastUnknownKidRefresh = 0;
  #signing: SigningKey | undefined;

  #box: SecretBox | undefined;

  private readonly db: AuthDb;

  constructor(
    db: Db,
    private readonly now: () => Date = () => new Date(),
    /** where to keep the current signing key for `bulwark admin token` (embedded database only) */
    private readonly keyFile?: string,
  ) {
    this.db = authDb(db);
  }

  /** Seals and unseals private keys; needed to sign, not to verify. */
  private box(): SecretBox {
    return (this.#box ??= new SecretBox(keyEncryptionKeyOf(this.db)));
  }

  /**
   * Seals the private keys an earlier version stored in plaintext (`private_jwk`) and clears them;
   * returns how many. The table is then rewritten, so the plaintext leaves its data files too.
   */
  async sealPlaintextKeys(): Promise<number> {
    const rows = await this.db
      .selectFrom("signing_keys")
      .select(["kid", "private_jwk"])
      .where("private_jwk", "is not", null)
      .execute();
    for (const row of rows) {
      await this.db
        .updateTable("signing_keys")
        .set({ private_key_jwe: await sealPrivateJwk(this.box(), row.kid, row.private_jwk as JWK), private_jwk: null })
        .where("kid", "=", row.kid)
        .where("private_jwk", "is not", null)
        .execute();
    }
    if (rows.length) await sql`vacuum full signing_keys`.execute(this.db).catch(() => {});
    return rows.length;
  }

  /** The key to sign with now, creating the next one when none is in its signing window. */
  async signingKey(): Promise<SigningKey> {
    const now = this.now();
    // Stop using a key a little before its window ends, so its tokens expire before unpublishing.
    if (this.#signing && this.#signing.signUntil.getTime() - now.getTime() > ROTATE_BEFORE_MS) return this.#signing;
    let row = await this.currentRow(now);
    if (!row) {
      await this.db.transaction().execute(async (trx) => {
        // One replica creates the next key; the others wait here and then find it.
        await sql`select pg_advisory_xact_lock(hashtext('bulwark.signing_keys'))`.execute(trx);
        const existing = await trx
          .selectFrom("signing_keys")
          .select("kid")
          .where("sign_until", ">", new Date(now.getTime() + ROTATE_BEFORE_MS))
          .executeTakeFirst();
        if (existing) return;
        const { publicKey, privateKey } = await generateKeyPair(ALGORITHM, { extractable: true });
        const kid = randomUUID();
        const signUntil = new Date(now.getTime() + SIGNING_WINDOW_MS);
        const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALGORITHM };
        await trx
          .insertInto("signing_keys")
          .values({
            kid,
            algorithm: ALGORITHM,
            private_key_jwe: await sealPrivateJwk(this.box(), kid, privateJwk),
            public_jwk: JSON.stringify({ ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: "sig" }),
            create_time: now,
            sign_until: signUntil,
            publish_until: new Date(signUntil.getTime() + MAX_TOKEN_LIFETIME_MS + 5 * 60_000),
          })
          .execute();
      });
      this.#published = undefined;
      row = await this.currentRow(now);
      if (!row) throw new Error("no signing key after creating one");
    }
    // A row an earlier version wrote is sealed here (sealPlaintextKeys seals the rest at start).
    const jwe = row.private_key_jwe ?? (await sealPrivateJwk(this.box(), row.kid, row.private_jwk as JWK));
    this.#signing = {
      kid: row.kid,
      privateKey: await importJWK(await unsealPrivateJwk(this.box(), row.kid, jwe), ALGORITHM),
      signUntil: row.sign_until,
    };
    if (this.keyFile) {
      const file: KeyFile = { kid: row.kid, privateKeyJwe: jwe, signUntil: row.sign_until.toISOString() };
      const tmp = `${this.keyFile}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(file), { mode: 0o600 });
      await rename(tmp, this.keyFile);
    }
    return this.#signing;
  }

  private currentRow(now: Date) {
    return this.db
      .selectFrom("signing_keys")
      .select(["kid", "private_key_jwe", "private_jwk", "sign_until"])
      .where("sign_until", ">", new Date(now.getTime() + ROTATE_BEFORE_MS))
      .orderBy("create_time", "desc")
      .limit(1)
      .executeTakeFirst();
  }

  /** Public keys to publish and verify with: every key whose tokens may still be valid. */
  async publishedKeys(options: { unknownKid?: string } = {}): Promise<PublishedKey[]> {
    const nowMs = this.now().getTime();
    const cached = this.#published;
    const stale = !cached || nowMs - cached.loadedAt > KEY_CACHE_MS;
    const missing =
      options.unknownKid !== undefined &&
      cached &&
      !cached.keys.some((k) => k.kid === options.unknownKid) &&
      nowMs - this.#lastUnknownKidRefresh > UNKNOWN_KID_COOLDOWN_MS;
    if (stale || missing) {
      if (missing) this.#lastUnknownKidRefresh = nowMs;
      const rows = await this.db
        .selectFrom("signing_keys")
        .select(["kid", "public_jwk"])
        .where("publish_until", ">", new Date(nowMs))
        .orderBy("create_time", "desc")
        .execute();
      this.#published = { keys: rows.map((r) => ({ kid: r.kid, jwk: r.public_jwk as JWK })), loadedAt: nowMs };
    }
    return this.#published!.keys;
  }

  /** Removes keys nobody can need any more. */
  async prune(): Promise<void> {
    await this.db.deleteFrom("signing_keys").where("publish_until", "<", this.now()).execute();
  }
}
