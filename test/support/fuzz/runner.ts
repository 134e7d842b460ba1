// Runs one fuzz target (an arbitrary of cases and how to send one) with fast-check, in two phases:
//   1. `numRuns` generated cases, every one sent and checked; the problems are collected (the run
//      does not stop at the first), the first case of each failure class remembered;
//   2. for each class, fast-check replays that case (seed + path) and shrinks it, keeping only
//      smaller cases that fail the same way, within a budget of extra requests.
// The result names target, class, a shrunk (truncated) counterexample, the seed and the path to
// replay it.
import fc from "fast-check";
import { HANG, type Problem } from "./wire.js";

/** After this many unanswered requests a target stops: each costs the whole time limit. */
const HANG_LIMIT = 3;

export interface FuzzTarget<T> {
  /** "REST GroupsService.GetGroup", ... */
  name: string;
  arb: fc.Arbitrary<T>;
  /** sends the case and returns what is wrong with the answer (empty: fine) */
  run(c: T): Promise<Problem[]>;
  /** the case, short enough for a failure message (a curl line, a hex dump, ...) */
  describe(c: T): string;
}

export interface Failure {
  target: string;
  kind: string;
  detail: string;
  example: string;
  seed: number;
  path: string;
  /** how many of the generated cases failed this way */
  count: number;
  shrunk: boolean;
}

export interface RunOptions {
  seed: number;
  numRuns: number;
  /** extra requests allowed to shrink each failure class */
  shrinkBudget: number;
  /** wall time allowed to shrink each failure class */
  shrinkTimeMs?: number;
  /** failure classes shrunk per target (the rest are reported unshrunk) */
  maxShrunkClasses?: number;
}

export async function fuzzTarget<T>(t: FuzzTarget<T>, opts: RunOptions): Promise<Failure[]> {
  const first = new Map<string, { index: number; detail: string; example: string; count: number }>();
  let index = 0;
  let hangs = 0;
  await fc.assert(
    fc.asyncProperty(t.arb, async (c) => {
      const i = index++;
      if (hangs >= HANG_LIMIT) return true;
      for (const p of dedupe(await t.run(c))) {
        if (p.kind === HANG) hangs++;
        const seen = first.get(p.kind);
        if (seen) seen.count++;
        else first.set(p.kind, { index: i, detail: p.detail, example: t.describe(c), count: 1 });
      }
      return true;
    }),
    { seed: opts.seed, numRuns: opts.numRuns },
  );

  const failures: Failure[] = [];
  let shrunkClasses = 0;
  for (const [kind, f] of first) {
    const failure: Failure = {
      target: t.name,
      kind,
      detail: f.detail,
      example: f.example,
      seed: opts.seed,
      path: String(f.index),
      count: f.count,
      shrunk: false,
    };
    if (hangs >= HANG_LIMIT) failure.detail += ` (stopped after ${HANG_LIMIT} unanswered requests)`;
    if (kind !== HANG && shrunkClasses++ < (opts.maxShrunkClasses ?? 3) && opts.shrinkBudget > 0) {
      let calls = 0;
      let shrinkHangs = 0;
      const deadline = Date.now() + (opts.shrinkTimeMs ?? 10_000);
      let last: { detail: string; example: string } | undefined;
      const details = await fc.check(
        fc.asyncProperty(t.arb, async (c) => {
          if (calls++ > opts.shrinkBudget || Date.now() > deadline) return true;
          const problems = await t.run(c);
          if (problems.some((p) => p.kind === HANG)) shrinkHangs++;
          if (shrinkHangs >= HANG_LIMIT) calls = Infinity;
          const hit = problems.find((p) => p.kind === kind);
          if (hit) last = { detail: hit.detail, example: t.describe(c) };
          return !hit;
        }),
        { seed: opts.seed, path: String(f.index), numRuns: f.index + 1 },
      );
      if (details.failed && last) {
        failure.shrunk = true;
        failure.path = details.counterexamplePath ?? failure.path;
        const cx = details.counterexample?.[0];
        failure.example = cx === undefined ? last.example : t.describe(cx);
        failure.detail = last.detail;
      }
    }
    failures.push(failure);
  }
  return failures;
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => !seen.has(p.kind) && (seen.add(p.kind), true));
}

/** Failures grouped by class, each with its targets and (shrunk) counterexamples. */
export function report(title: string, failures: Failure[]): string {
  if (!failures.length) return "";
  const byKind = new Map<string, Failure[]>();
  for (const f of failures) byKind.set(f.kind, [...(byKind.get(f.kind) ?? []), f]);
  const lines = [`${title}: ${failures.length} failure(s) in ${byKind.size} class(es)`];
  for (const [kind, list] of byKind) {
    lines.push(`\n■ ${kind}  (${list.length} target(s))`);
    for (const f of list.slice(0, 12)) {
      lines.push(
        f.path === "-"
          ? `  - ${f.target}  [${f.count} case(s); fixed case]`
          : `  - ${f.target}  [${f.count} case(s); ${f.shrunk ? "shrunk" : "not shrunk"}; replay: FUZZ_SEED=${f.seed} path ${f.path}]`,
        `      case:   ${f.example}`,
        `      answer: ${f.detail}`,
      );
    }
    if (list.length > 12)
      lines.push(
        `  … and ${list.length - 12} more: ${list
          .slice(12)
          .map((f) => f.target)
          .join(", ")}`,
      );
  }
  return lines.join("\n");
}

/** A fixed (non-generated) case list run through the same checks, grouped the same way. */
export async function runFixed<T>(
  name: (c: T) => string,
  cases: T[],
  run: (c: T) => Promise<Problem[]>,
  describe: (c: T) => string,
): Promise<Failure[]> {
  const byKey = new Map<string, Failure>();
  for (const c of cases) {
    for (const p of dedupe(await run(c))) {
      const key = `${name(c)}\u0000${p.kind}`;
      const seen = byKey.get(key);
      if (seen) seen.count++;
      else
        byKey.set(key, {
          target: name(c),
          kind: p.kind,
          detail: p.detail,
          example: describe(c),
          seed: 0,
          path: "-",
          count: 1,
          shrunk: false,
        });
    }
  }
  return [...byKey.values()];
}
