// The V8 flags `serve` runs under, and the one rule that decides them (the database it is given).
// A module of its own, with nothing to load but Node's: the launcher (launch.ts) sets them before
// the server's code is compiled, since V8 accepts a code cache only under the flags it was made with.
import { PGLITE_V8_FLAGS } from "../core/v8-flags.js";

/**
 * V8 flags `serve` sets for itself as it starts (no wrapper, no restart: flags V8 reads while it
 * runs). The young generation no longer doubles up to V8's most (two 16 MiB semi-spaces, reached
 * during start-up already): measured 8 MiB in all when ready, 16 MiB after load. V8 keeps a grown
 * young generation committed (and resident) for the life of the process: ~20 MiB of an idle server,
 * and 184 -> 271-276 MiB after a GET load on PGlite without this flag. The price is CPU under
 * concurrent load: scavenges come ~3x as often, requests in flight outlive two of them and are
 * promoted, and a 32-connection GET on PostgreSQL serves 10-15% fewer requests per second
 * (bench/RESULTS.md, "fourth pass"). So only the embedded server sets them: it is the small
 * deployment, where memory counts. On PostgreSQL (replicas, production) V8's defaults hold, and
 * the young generation's ~20 MiB more buys the throughput.
 */
export const SERVE_V8_FLAGS = "--semi-space-growth-factor=1";

/**
 * V8 flags for the start only: the launcher sets them before the server's code is compiled, and
 * the server turns them back (LISTENING_V8_FLAGS) once it listens. TurboFan otherwise spends the
 * start optimizing functions that are hot only while it lasts (descriptors decoded, routes and
 * registries built), on V8's background threads, each compile's memory touched anew. Without it, a
 * start on the embedded database measured 80-230 ms less to ready, 290-470 ms less CPU, ~4,000
 * fewer page faults and 7-8 MiB less resident (bench/RESULTS.md, "eighteenth pass").
 */
export const START_V8_FLAGS: readonly string[] = ["--no-opt"];

/** What the server sets once it listens: TurboFan back on, for everything it serves from then on. */
export const LISTENING_V8_FLAGS: readonly string[] = ["--opt"];

/**
 * Whether `serve` with these arguments (those after `serve`) and this environment runs on the
 * embedded database: as commander reads `--database-url` (the last flag, else DATABASE_URL), an
 * empty URL meaning none. Mirrors server.ts's option; test/cli/code-cache.test.ts holds them together.
 */
export function servesEmbedded(args: readonly string[], env: NodeJS.ProcessEnv): boolean {
  let url = env.DATABASE_URL;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") break;
    if (arg === "--database-url") url = args[++i];
    else if (arg.startsWith("--database-url=")) url = arg.slice("--database-url=".length);
  }
  return !url;
}

/**
 * Every V8 flag a `serve` with these arguments and environment starts under (the launcher sets
 * them, in this order, before compiling the server), with the code cache profile they make.
 */
export function serveV8Flags(args: readonly string[], env: NodeJS.ProcessEnv): { flags: string[]; profile: string } {
  return servesEmbedded(args, env)
    ? { flags: [SERVE_V8_FLAGS, PGLITE_V8_FLAGS, ...START_V8_FLAGS], profile: "embedded" }
    : { flags: [...START_V8_FLAGS], profile: "postgres" };
}
