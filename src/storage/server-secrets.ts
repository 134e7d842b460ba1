// Secrets every replica on one database shares (the page-token key, the key that encrypts IdP
// client secrets, ...): made once, by whichever replica asks first, and kept in server_secrets
// sealed under the key-encryption key (a JWE bound to the secret's name), like the signing keys,
// so a copy of the database alone opens none of what they protect.
import { randomBytes } from "node:crypto";
import { SecretBox } from "../core/secret-box.js";
import { keyEncryptionKeyOf, type Db } from "./db.js";

/** What a sealed secret is bound to: a ciphertext moved to another name does not open. */
const contextOf = (name: string) => `server_secrets/${name}`;

/** The named secret shared by all replicas, created on first use. */
export async function loadSharedSecret(db: Db, name: string): Promise<Uint8Array> {
  const box = new SecretBox(keyEncryptionKeyOf(db));
  const seal = (secret: Uint8Array) => box.encrypt(Buffer.from(secret).toString("base64url"), contextOf(name));
  const read = () =>
    db.selectFrom("server_secrets").select(["secret", "secret_jwe"]).where("name", "=", name).executeTakeFirst();
  let row = await read();
  if (!row) {
    await db
      .insertInto("server_secrets")
      .values({ name, secret_jwe: await seal(randomBytes(32)) })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
  } else if (row.secret_jwe === null && row.secret !== null) {
    // Written in plaintext by an earlier version: sealed once (a replica sealing it at the same time
    // seals the same bytes; the first update wins), keeping the secret itself, so what it
    // encrypted stays readable.
    await db
      .updateTable("server_secrets")
      .set({ secret_jwe: await seal(new Uint8Array(row.secret)), secret: null })
      .where("name", "=", name)
      .where("secret_jwe", "is", null)
      .execute();
  }
  row = await read();
  if (!row?.secret_jwe) throw new Error(`server secret ${name} could not be stored`);
  try {
    return new Uint8Array(Buffer.from(await box.decrypt(row.secret_jwe, contextOf(name)), "base64url"));
  } catch (err) {
    throw new Error(
      `cannot unseal server secret ${name}: it was sealed with another key-encryption key than this one ` +
        `(BULWARK_KEY_ENCRYPTION_KEY on PostgreSQL, the data directory's key-encryption-key file otherwise)`,
      { cause: err },
    );
  }
}
