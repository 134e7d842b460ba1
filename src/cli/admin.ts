// `bulwark admin token`: a one-hour token for the platform operator, who may do everything.
// Trust comes from access to the database, not the network: it signs with the issuer's key,
// read from PostgreSQL, or (embedded database) from the key file the server keeps in its data
// directory. There is no admin endpoint.
import { existsSync } from "node:fs";
import { KeyManager, readKeyFile } from "../auth/keys.js";
import { OPERATOR_SUBJECT, TokenIssuer, type AuthUrls, type KeySource } from "../auth/tokens.js";
import { issuerKeyFile } from "../auth/module.js";
import { openDatabase } from "../storage/db.js";
import { migrateAll } from "../server/start.js";

export interface AdminTokenOptions {
  dataDir: string;
  databaseUrl?: string;
  urls: AuthUrls;
  audience: string;
}

export async function adminToken(opts: AdminTokenOptions): Promise<{ token: string; expiry: Date }> {
  const mint = (keys: KeySource) =>
    new TokenIssuer(keys, opts.urls).mint({ subject: OPERATOR_SUBJECT, audience: [opts.audience] });
  if (!opts.databaseUrl) {
    // A running server holds the embedded database; its key file is how we sign meanwhile.
    const fromFile = await readKeyFile(issuerKeyFile(opts.dataDir));
    if (fromFile && fromFile.signUntil.getTime() > Date.now() + 60_000)
      return mint({ signingKey: async () => fromFile });
    if (!existsSync(opts.dataDir))
      throw new Error(
        `no database in ${opts.dataDir}: start the server once (bulwark serve --data-dir ${opts.dataDir})`,
      );
  }
  const database = await openDatabase({ databaseUrl: opts.databaseUrl, dataDir: opts.dataDir, poolSize: 1 });
  try {
    await migrateAll(database.db);
    const keyFile = database.backend === "pglite" ? issuerKeyFile(opts.dataDir) : undefined;
    return await mint(new KeyManager(database.db, undefined, keyFile));
  } finally {
    await database.close();
  }
}
