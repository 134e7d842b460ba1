// The public URLs a server runs with, recorded when it starts listening: in the database (every
// backend; replicas behind one URL write the same row) and, for an embedded data directory, in a
// file beside the issuer's key file, where `bulwark admin token` reads them while the server
// holds the database. So the operator's token carries the issuer and audience the server expects.
// The file also holds the address the server listens on (`listenUrl`, added later: absent in a
// file an older server wrote), where a tool on this host calls it rather than at its public URL.
import { readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Db } from "../storage/db.js";
import type { AuthUrls } from "./tokens.js";
import { authDb } from "./storage/schema.js";

export function recordedUrlsFile(dataDir: string): string {
  return join(dataDir, "public-urls.json");
}

/** What the file holds: the public URLs, and the address the server listens on. */
interface RecordedFile extends AuthUrls {
  listenUrl?: string;
}

export async function recordPublicUrls(db: Db, urls: AuthUrls, dataDir?: string, listenUrl?: string): Promise<void> {
  const row = { issuer: urls.issuer, api_audience: urls.apiAudience, registry_audience: urls.registryAudience };
  await authDb(db)
    .insertInto("issuer_urls")
    .values({ singleton: true, ...row, record_time: new Date() })
    .onConflict((oc) => oc.column("singleton").doUpdateSet({ ...row, record_time: new Date() }))
    .execute();
  if (dataDir) {
    const path = recordedUrlsFile(dataDir);
    const tmp = `${path}.${process.pid}.tmp`;
    const recorded: RecordedFile = {
      issuer: urls.issuer,
      apiAudience: urls.apiAudience,
      registryAudience: urls.registryAudience,
      ...(listenUrl ? { listenUrl } : {}),
    };
    await writeFile(tmp, JSON.stringify(recorded, null, 2) + "\n", { mode: 0o644 });
    await rename(tmp, path);
  }
}

/** What the last server to start on this database recorded; undefined when none has yet. */
export async function recordedPublicUrls(db: Db): Promise<AuthUrls | undefined> {
  const row = await authDb(db).selectFrom("issuer_urls").selectAll().executeTakeFirst();
  return row && { issuer: row.issuer, apiAudience: row.api_audience, registryAudience: row.registry_audience };
}

/** The file's URLs if it was written at or after `since` (ms; by the server holding the directory now). */
export async function recordedPublicUrlsFile(dataDir: string, since?: number): Promise<AuthUrls | undefined> {
  const recorded = await recordedFile(dataDir, since);
  return (
    recorded && {
      issuer: recorded.issuer,
      apiAudience: recorded.apiAudience,
      registryAudience: recorded.registryAudience,
    }
  );
}

/** The address the server that wrote the file listens on, if it recorded one (see recordedPublicUrlsFile). */
export async function recordedListenUrlFile(dataDir: string, since?: number): Promise<string | undefined> {
  return (await recordedFile(dataDir, since))?.listenUrl;
}

async function recordedFile(dataDir: string, since?: number): Promise<RecordedFile | undefined> {
  const path = recordedUrlsFile(dataDir);
  try {
    if (since !== undefined && (await stat(path)).mtimeMs < since) return undefined;
    const parsed = JSON.parse(await readFile(path, "utf8")) as Partial<RecordedFile>;
    if (
      typeof parsed.issuer !== "string" ||
      typeof parsed.apiAudience !== "string" ||
      typeof parsed.registryAudience !== "string"
    )
      return undefined;
    return {
      issuer: parsed.issuer,
      apiAudience: parsed.apiAudience,
      registryAudience: parsed.registryAudience,
      ...(typeof parsed.listenUrl === "string" ? { listenUrl: parsed.listenUrl } : {}),
    };
  } catch {
    return undefined;
  }
}
