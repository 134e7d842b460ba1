// Waiting in tests without betting on the machine's speed. A test waits for an event (a line of a
// child's output, a file, a promise, a child's exit, the clock passing a timestamp) and asserts the
// order of events, never how long something took. The one time limit, HANG_MS, only stops a wait
// that would otherwise never end, and is far beyond what a loaded machine needs.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

/** How long a wait may last before the test counts it as a hang. */
export const HANG_MS = 180_000;

/**
 * `promise`, or a rejection saying what never happened once `ms` have passed without it settling.
 * `what` may be a function, to describe the state at that moment (the output so far).
 */
export async function withinHang<T>(promise: Promise<T>, what: string | (() => string), ms = HANG_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no ${typeof what === "function" ? what() : what} after ${ms / 1000} s (a hang)`)),
      ms,
    );
  });
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The first truthy answer of `probe`, asked again every `everyMs`: for a condition that has no
 * event of its own (a file appearing or growing, a store's content). A probe may throw to give up
 * (an assertion that the process it waits on still runs).
 */
export async function until<T>(
  probe: () => T | Promise<T>,
  what: string | (() => string),
  { everyMs = 10, ms = HANG_MS }: { everyMs?: number; ms?: number } = {},
): Promise<NonNullable<T>> {
  return withinHang(
    (async () => {
      for (;;) {
        const answer = await probe();
        if (answer) return answer as NonNullable<T>;
        await sleep(everyMs);
      }
    })(),
    what,
    ms,
  );
}

/**
 * Resolves once this process's clock reads later than `time` (an ISO timestamp, a Date or epoch
 * milliseconds): a timestamp taken from then on is greater than it. For tests that need distinct,
 * ordered times, instead of a fixed sleep.
 */
export async function clockPast(time: string | number | Date): Promise<void> {
  const t = typeof time === "number" ? time : new Date(time).getTime();
  assert.ok(Number.isFinite(t), `not a time: ${String(time)}`);
  while (Date.now() <= t) await sleep(t - Date.now() + 1);
}

/** What a child process writes (stdout and stderr together), and waits for a pattern in it. */
export interface WatchedOutput {
  /** everything written so far */
  text(): string;
  /**
   * Resolves with the first match of `re` in the output (already there, or once it is written);
   * rejects if the child's streams close without it, or at HANG_MS.
   */
  waitFor(re: RegExp): Promise<RegExpMatchArray>;
}

/** Collects the child's stdout and stderr (it must have been spawned with both piped). */
export function watchOutput(child: ChildProcess): WatchedOutput {
  let out = "";
  let closed = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  for (const stream of [child.stdout, child.stderr]) {
    stream!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      wake();
    });
  }
  // "close", not "exit": only then has everything the child wrote been read.
  child.once("close", () => {
    closed = true;
    wake();
  });
  return {
    text: () => out,
    waitFor(re) {
      let check = () => {};
      const found = new Promise<RegExpMatchArray>((resolve, reject) => {
        check = () => {
          const m = re.exec(out);
          if (m) resolve(m);
          else if (closed)
            reject(new Error(`exited (${child.exitCode ?? child.signalCode}) before writing ${re}:\n${out}`));
          else return;
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
      return withinHang(found, () => `${re} in the output:\n${out}`).finally(() => waiters.delete(check));
    },
  };
}

/** A promise and the function that settles it, for a test to open when an event has happened. */
export function signal<T = void>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
