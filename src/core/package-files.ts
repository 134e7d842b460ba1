// Where the package's own files are (package.json, bin/, openapi/). Computed from this module's URL:
// it compiles to dist/core/, and the bundle (scripts/bundle.mjs) to dist/bundle/, both two
// directories below the package root.
import { fileURLToPath } from "node:url";

export const PACKAGE_ROOT: string = fileURLToPath(new URL("../..", import.meta.url));
