// The embedded database's data directory: open in one process at a time (a lock file made with
// O_EXCL), private to its owner (directories 0700, files 0600), and home of the key-encryption key
// that seals the secrets the database keeps (the issuer's private keys).
import { randomBytes } from "node:crypto";
import { chmodSync, lstatSync, readdirSync, readFileSync, unlinkSync } from "node:fs";
import { link, open, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";

export const LOCK_FILE = "bulwark.lock";
export const KEY_ENCRYPTION_KEY_FILE = "key-encryption-key";

/**
 * Who opened the directory: a long-running `serve`, or a brief `admin token` (which a starting
 * server waits for instead of failing).
 */
export type LockPurpose = "serve" | "admin token" | "registry gc" | "backup";

/** The lock file's content. */
export interface LockHolder {
  pid: number;
  hostname: string;
  purpose: LockPurpose | string;
  /** ISO time the lock was taken */
  since: string;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: LockHolder,
  ) {
    const where = holder.hostname === hostname() ? "" : ` on host ${holder.hostname}`;
    super(
      `the data directory ${dir} is in use by another process: pid ${holder.pid}${where} ` +
        `(${holder.purpose}, since ${holder.since}). An embedded database is opened by one process at a time: ` +
        `stop that process first (or use PostgreSQL for several replicas); if no such process runs, remove ${join(dir, LOCK_FILE)}`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  readonly dir: string;
  readonly holder: LockHolder;
  /** Removes the lock file (if it is still ours). */
  release(): Promise<void>;
}

export interface LockOptions {
  purpose: LockPurpose;
  /** how long to wait for a brief holder (`admin token`) to let go; default 20 s */
  waitForBriefHolderMs?: number;
  /** told about a stale lock removed, or a brief holder waited for */
  notice?: (message: string, details: Record<string, unknown>) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const errno = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/** Whether a process with this pid runs on this host (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errno(err) === "EPERM";
  }
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const h = JSON.parse(text) as Partial<LockHolder>;
    if (Number.isInteger(h.pid) && h.pid! > 0 && typeof h.hostname === "string" && typeof h.purpose === "string") {
      return { pid: h.pid!, hostname: h.hostname, purpose: h.purpose, since: String(h.since ?? "") };
    }
  } catch {
    // garbled: a holder killed while writing it, or one writing it right now
  }
  return undefined;
}

/** The holder of the directory's lock, if any (a stale one included: see `isStale`). */
export async function lockHolder(dir: string): Promise<LockHolder | undefined> {
  try {
    return parseHolder(await readFile(join(dir, LOCK_FILE), "utf8"));
  } catch (err) {
    if (errno(err) === "ENOENT") return undefined;
    throw err;
  }
}

/** A lock left by a process that no longer runs (decidable only for holders on this host). */
export function isStale(holder: LockHolder): boolean {
  return holder.hostname === hostname() && !processAlive(holder.pid);
}

/** The file's content and age, or undefined when it is gone. */
async function readWithAge(path: string): Promise<{ text: string; ageMs: number } | undefined> {
  try {
    const [text, st] = await Promise.all([readFile(path, "utf8"), stat(path)]);
    return { text, ageMs: Date.now() - st.mtimeMs };
  } catch (err) {
    if (errno(err) === "ENOENT") return undefined;
    throw err;
  }
}

/** A garbled lock file younger than this may still be being written. */
const GARBLED_GRACE_MS = 2_000;

/**
 * Removes a stale lock whose content is still `seen`. A second file, made with O_EXCL too, keeps two
 * processes that found the same stale lock from both removing it (the later would remove the lock
 * the earlier just took). Returns whether it was removed; on false the caller looks again.
 */
async function removeStale(path: string, seen: string): Promise<boolean> {
  const guard = `${path}.takeover`;
  try {
    await writeFile(guard, `${process.pid}\n`, { flag: "wx", mode: 0o600 });
  } catch (err) {
    if (errno(err) !== "EEXIST") throw err;
    // Another process is taking over; if it died doing so, clear its guard for the next look.
    const other = await readWithAge(guard);
    const pid = other && Number(other.text.trim());
    if (other && (pid ? !processAlive(pid) : other.ageMs > GARBLED_GRACE_MS)) await unlink(guard).catch(() => {});
    return false;
  }
  try {
    const now = await readFile(path, "utf8").catch(() => undefined);
    if (now !== seen) return false;
    await unlink(path);
    return true;
  } finally {
    await unlink(guard).catch(() => {});
  }
}

/**
 * Takes the data directory's lock for the life of this process's use of it: fails at once on a
 * live holder, waits up to `waitForBriefHolderMs` for an `admin token`, and removes a lock left by a
 * process that no longer runs on this host (after `kill -9`, a crash or a power loss).
 */
export async function lockDataDir(dir: string, opts: LockOptions): Promise<DataDirLock> {
  const path = join(dir, LOCK_FILE);
  const deadline = Date.now() + (opts.waitForBriefHolderMs ?? 20_000);
  let waitedFor: number | undefined;
  for (;;) {
    const me: LockHolder = {
      pid: process.pid,
      hostname: hostname(),
      purpose: opts.purpose,
      since: new Date().toISOString(),
    };
    const text = JSON.stringify(me) + "\n";
    try {
      await writeFile(path, text, { flag: "wx", mode: 0o600 });
      return heldLock(dir, path, me, text);
    } catch (err) {
      if (errno(err) !== "EEXIST") throw err;
    }
    const found = await readWithAge(path);
    if (!found) continue; // released meanwhile
    const holder = parseHolder(found.text);
    if (!holder) {
      if (found.ageMs > GARBLED_GRACE_MS && (await removeStale(path, found.text)))
        opts.notice?.(`removed an unreadable lock file from ${dir}`, { dataDir: dir, content: found.text });
      else await sleep(100);
      continue;
    }
    if (isStale(holder)) {
      if (await removeStale(path, found.text))
        opts.notice?.(`removed a stale lock of ${dir}: pid ${holder.pid} (${holder.purpose}) no longer runs`, {
          dataDir: dir,
          holder,
        });
      continue;
    }
    if (holder.purpose === "admin token" && holder.pid !== process.pid && Date.now() < deadline) {
      if (waitedFor !== holder.pid) {
        waitedFor = holder.pid;
        opts.notice?.(`waiting for \`bulwark admin token\` (pid ${holder.pid}) to let go of ${dir}`, {
          dataDir: dir,
          holder,
        });
      }
      await sleep(200);
      continue;
    }
    throw new DataDirLockedError(dir, holder);
  }
}

function heldLock(dir: string, path: string, holder: LockHolder, text: string): DataDirLock {
  const stillOurs = () => {
    try {
      return readFileSync(path, "utf8") === text;
    } catch {
      return false;
    }
  };
  // Best effort when the process exits without closing (an uncaught error, process.exit).
  const onExit = () => {
    if (stillOurs()) {
      try {
        unlinkSync(path);
      } catch {
        // gone already
      }
    }
  };
  process.on("exit", onExit);
  let released = false;
  return {
    dir,
    holder,
    async release() {
      if (released) return;
      released = true;
      process.off("exit", onExit);
      if (stillOurs()) await unlink(path).catch(() => {});
    },
  };
}

/**
 * Subdirectories of a data directory whose writer makes every file private itself as it writes
 * (the registry's blobs: possibly very many files), so opening and closing need not walk them.
 */
export const SELF_PROTECTED_SUBDIRECTORIES: ReadonlySet<string> = new Set(["registry"]);

/**
 * Makes the directory and everything under it private to its owner: directories 0700, files 0600
 * (PGlite writes its files 0666). Symbolic links are left alone; files that vanish meanwhile are
 * skipped; the top level's self-protected subdirectories only get their own mode checked.
 *
 * Synchronous on purpose: it runs only while a data directory opens or closes, when nothing is
 * served, and over a thousand lstat calls take ~5 ms this way against ~100 ms through the thread
 * pool while PGlite starts.
 */
export function makePrivate(dir: string): void {
  const walk = (path: string, deep = true): void => {
    let st;
    try {
      st = lstatSync(path);
    } catch (err) {
      if (errno(err) === "ENOENT") return;
      throw err;
    }
    if (st.isSymbolicLink()) return;
    if (st.isDirectory()) {
      if ((st.mode & 0o777) !== 0o700) chmodSync(path, 0o700);
      if (!deep) return;
      let names: string[];
      try {
        names = readdirSync(path);
      } catch (err) {
        if (errno(err) === "ENOENT") return;
        throw err;
      }
      const top = path === dir;
      for (const name of names) walk(join(path, name), !(top && SELF_PROTECTED_SUBDIRECTORIES.has(name)));
    } else if ((st.mode & 0o777) !== 0o600) {
      try {
        chmodSync(path, 0o600);
      } catch (err) {
        if (errno(err) !== "ENOENT") throw err;
      }
    }
  };
  walk(dir);
}

let privateUsers = 0;
let savedUmask: number | undefined;

/**
 * While an embedded data directory is open, files this process creates are private to its owner
 * (PostgreSQL inside PGlite creates some with the process's umask). Returns the undo.
 */
export function privateUmask(): () => void {
  try {
    if (privateUsers++ === 0) savedUmask = process.umask(0o077);
  } catch {
    // worker threads cannot change the umask; makePrivate still runs at open and close
  }
  let undone = false;
  return () => {
    if (undone) return;
    undone = true;
    try {
      if (--privateUsers === 0 && savedUmask !== undefined) process.umask(savedUmask);
    } catch {
      // as above
    }
  };
}

/** fsync of a directory: the names it holds (a file linked or renamed into it) survive a power loss. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** 32 bytes given as 64 hex digits or 43 base64url characters (unpadded); `what` names the source in errors. */
export function parseKeyEncryptionKey(value: string, what: string): Uint8Array {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(v)) return new Uint8Array(Buffer.from(v, "hex"));
  if (/^[A-Za-z0-9_-]{43}=?$/.test(v)) {
    const key = Buffer.from(v.replace(/=$/, ""), "base64url");
    if (key.length === 32) return new Uint8Array(key);
  }
  throw new Error(`${what} must be 32 bytes written as 64 hex digits or 43 base64url characters`);
}

/**
 * The key-encryption key kept in the data directory (a 0600 file holding 32 random bytes in
 * base64url), made on first use when `create` is set; undefined when absent and not created.
 */
export async function dataDirKeyEncryptionKey(dir: string, create: boolean): Promise<Uint8Array | undefined> {
  const path = join(dir, KEY_ENCRYPTION_KEY_FILE);
  if (create) {
    // Written aside and linked into place: the file appears complete or not at all. Synced, file
    // and directory, before anything is sealed with it: a power loss must not keep sealed rows
    // (the database is durable) and lose the key that opens them.
    const tmp = `${path}.${process.pid}.tmp`;
    const file = await open(tmp, "wx", 0o600);
    try {
      await file.writeFile(randomBytes(32).toString("base64url") + "\n");
      await file.sync();
    } finally {
      await file.close();
    }
    let made = false;
    try {
      await link(tmp, path);
      made = true;
    } catch (err) {
      if (errno(err) !== "EEXIST") throw err;
    } finally {
      await unlink(tmp);
    }
    if (made) await syncDirectory(dir);
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if (errno(err) === "ENOENT") return undefined;
    throw err;
  }
  return parseKeyEncryptionKey(text, path);
}
