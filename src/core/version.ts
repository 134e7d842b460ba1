// The version of this build (package.json's), reported by /healthz and `bulwark version`. In core
// (its one read of a file, once, at load) so the CLI's client commands know it without server code.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "./package-files.js";

export const VERSION: string = (
  JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string }
).version;
