// Secrets every replica on one database shares (the page-token key, the key that encrypts IdP
// client secrets, ...): made once, by whichever replica asks first, and kept in server_secrets.
import { randomBytes } from "node:crypto";
import type { Db } from "./db.js";

/** The named secret shared by all replicas, created on first use. */
export async function loadSharedSecret(db: Db, name: string): Promise<Uint8Array> {
  await db
    .insertInto("server_secrets")
    .values({ name, secret: randomBytes(32) })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  const row = await db.selectFrom("server_secrets").select("secret").where("name", "=", name).executeTakeFirstOrThrow();
  return new Uint8Array(row.secret);
}
