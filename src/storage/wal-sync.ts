// Group commit for the embedded database. PostgreSQL syncs the WAL at each commit, and on PGlite
// that fsync ran on the main thread: under concurrent writes it held the event loop ~0.5 ms per
// commit (15% of a tag-push load's main thread, measured), with nothing else served meanwhile.
//
// Here a WAL file's fsync only notes the file; the sync runs on libuv's thread pool, and nothing
// the database answers reaches its caller before every commit made so far is synced — not the
// commit's own answer, and no read either (a read could show a commit another caller is still
// waiting for), read cache hits included. So an answered write is on disk, and nobody has seen
// anything that is not; commits that arrive during one sync share the next (group commit).
//
// What PostgreSQL orders by its WAL stays ordered: before any change to a file that is not WAL
// (a data page written, a file truncated, renamed or removed, any other fsync), the noted WAL is
// synced at once, on the main thread, as before. A data page never reaches the disk ahead of the
// WAL that describes it, and no file of a dropped table goes before the drop's commit is synced.
import { closeSync, fsync, fsyncSync, openSync } from "node:fs";

/** WAL segment files: pg_wal/ and 24 hex digits. */
const WAL_SEGMENT = /[/\\]pg_wal[/\\][0-9A-F]{24}$/;

export function isWalSegment(path: string): boolean {
  return WAL_SEGMENT.test(path);
}

/** How a sync is made (the kernel's; tests hold one to see who waits for it). */
export type SyncFile = (fd: number) => Promise<void>;

const kernelSync: SyncFile = (fd) =>
  new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));

/** Our own descriptors of WAL files at most (PostgreSQL writes one segment at a time). */
const OPEN_FILES = 4;

export class WalSync {
  /** WAL files written and not yet being synced */
  readonly #noted = new Set<string>();
  /** WAL files the running round syncs */
  #syncing = new Set<string>();
  /**
   * Descriptors of our own for the WAL files (fsync on any descriptor syncs the file's data):
   * PostgreSQL may close its own while a sync on the thread pool still has ours. Least recently
   * used first.
   */
  readonly #fds = new Map<string, number>();
  /** the round of syncs running, if any */
  #running: Promise<void> | undefined;
  /** whether now() synced what the running round syncs (then it need not again until more is noted) */
  #roundCovered = false;
  #closed = false;
  /** the round after it: what is noted while one runs is synced together once it ends */
  #next: Promise<void> | undefined;
  #failed: Error | undefined;

  constructor(private readonly syncFile: SyncFile = kernelSync) {}

  /** A WAL file PostgreSQL asked to fsync: synced before any answer (durable) or any other change (now). */
  note(path: string): void {
    this.#noted.add(path);
  }

  /** Whether nothing is noted or being synced, and no sync failed (a cheap test before awaiting durable). */
  get idle(): boolean {
    return this.#noted.size === 0 && this.#running === undefined && this.#failed === undefined;
  }

  /** Whether now() has anything to sync (or a failure to report) before another change to a file. */
  get behind(): boolean {
    return this.#noted.size > 0 || (this.#running !== undefined && !this.#roundCovered) || this.#failed !== undefined;
  }

  /**
   * Settles once everything noted so far is on disk. Rejects, now and ever after, if a sync
   * failed (as PostgreSQL stops at a failed fsync: what it wrote may be lost, and a later fsync
   * may not say so).
   */
  durable(): Promise<void> {
    if (this.#failed) return Promise.reject(this.#failed);
    if (this.#noted.size === 0) return this.#running ?? Promise.resolve();
    if (this.#running) return (this.#next ??= this.#running.then(() => ((this.#next = undefined), this.durable())));
    const paths = [...this.#noted];
    this.#noted.clear();
    this.#syncing = new Set(paths);
    this.#roundCovered = false;
    const round = (async () => {
      try {
        // every sync settled before its descriptor may be closed or its failure reported
        const results = await Promise.allSettled(paths.map(async (path) => this.syncFile(this.#fdOf(path))));
        const failed = results.find((r) => r.status === "rejected");
        if (failed) throw this.#fail(failed.reason);
        if (this.#failed) throw this.#failed; // now() failed meanwhile: these syncs may have missed it
      } finally {
        this.#running = undefined;
        this.#syncing = new Set();
        if (this.#closed) this.#closeFds();
      }
    })();
    this.#running = round;
    return round;
  }

  /**
   * Syncs everything noted or being synced now, on this thread: before a change PostgreSQL
   * orders after its WAL. A sync still running on the pool is then redundant (and harmless).
   */
  now(): void {
    this.#check();
    if (!this.behind) return;
    try {
      for (const path of new Set([...this.#noted, ...this.#syncing])) fsyncSync(this.#fdOf(path));
    } catch (err) {
      // The kernel reports a lost write once: a later fsync would succeed over it.
      this.#fail(err);
      this.#check();
    }
    this.#noted.clear();
    this.#roundCovered = this.#running !== undefined;
  }

  /** Closes our descriptors (the database is closed; everything it wrote was synced by now()). */
  close(): void {
    this.#closed = true;
    this.#closeFds();
  }

  /** Our descriptors but those a running sync still uses (closed when it ends, after close()). */
  #closeFds(): void {
    for (const [path, fd] of this.#fds) {
      if (this.#syncing.has(path)) continue;
      this.#fds.delete(path);
      closeSync(fd);
    }
  }

  #fail(cause: unknown): Error {
    return (this.#failed ??= new Error("the embedded database's WAL could not be synced to disk", { cause }));
  }

  /** After a failed sync, PostgreSQL's next sync fails too (an I/O error: it stops, as at its own). */
  #check(): void {
    if (this.#failed) throw Object.assign(new Error(this.#failed.message), { code: "EIO" });
  }

  #fdOf(path: string): number {
    let fd = this.#fds.get(path);
    if (fd !== undefined) {
      this.#fds.delete(path);
      this.#fds.set(path, fd); // most recently used last
      return fd;
    }
    fd = openSync(path, "r");
    this.#fds.set(path, fd);
    for (const [old, oldFd] of this.#fds) {
      if (this.#fds.size <= OPEN_FILES) break;
      if (this.#syncing.has(old) || this.#noted.has(old)) continue;
      this.#fds.delete(old);
      closeSync(oldFd);
    }
    return fd;
  }
}
