// Where the repository is, whether the suites run compiled (`npm test`: scripts/test-build.mjs, from
// .cache/test-build/) or as TypeScript through tsx (`node --import tsx --test <file>`).
import { realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The root of the tree these suites run from: the repository, or the compiled tree. */
const RUN_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The repository's root. In the compiled tree package.json is a link to the repository's. */
export const REPO_ROOT = dirname(realpathSync(join(RUN_ROOT, "package.json")));

/** Whether this run's suites are the compiled tree's. */
const COMPILED_RUN = import.meta.url.endsWith(".js");

/** The URL to import a TypeScript module of the repository by (`src/gen/x_pb.ts`): its compiled twin in a compiled run. */
export function moduleUrl(repoPath: string): string {
  return pathToFileURL(COMPILED_RUN ? join(RUN_ROOT, repoPath.replace(/\.ts$/, ".js")) : join(REPO_ROOT, repoPath))
    .href;
}

/** Node's arguments a child needs to import modules by `moduleUrl`: tsx's loader, unless compiled. */
export const TS_LOADER_ARGS: readonly string[] = COMPILED_RUN ? [] : ["--import", "tsx"];

/**
 * Node's arguments that run the CLI (`bulwark <args>` follows them). In a compiled run (`npm test`)
 * the built executable, bin/bulwark.js, which the run's prepare built from the same sources: what
 * users run, and a `serve` of it starts on ~1.3 s of CPU where the compiled tree's modules took
 * ~2.9 s. As TypeScript, src/cli/main.ts through tsx, so that one file runs without a build.
 */
export const CLI_ARGS: readonly string[] = COMPILED_RUN
  ? [join(REPO_ROOT, "bin", "bulwark.js")]
  : ["--import", "tsx", join(REPO_ROOT, "src", "cli", "main.ts")];

/**
 * Whether a child of a suite that starts without the run's Bulwark settings drops this variable:
 * every BULWARK_* but the initdb template (storage/db.ts INITDB_TEMPLATE_ENV), which changes
 * nothing a child does, only the CPU its first start costs.
 */
export function isBulwarkSetting(name: string): boolean {
  return name.startsWith("BULWARK_") && name !== "BULWARK_INITDB_TEMPLATE";
}
