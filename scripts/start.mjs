#!/usr/bin/env node
// `npm start [-- flags]`: builds only if a source changed since the last build (scripts/build.mjs),
// then runs `bulwark serve` with the flags in this same process, so signals reach the server as
// they would with `node bin/bulwark.js serve`.
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";

build({ ifChanged: true });
const bin = fileURLToPath(new URL("../bin/bulwark.js", import.meta.url));
process.argv = [process.argv[0], bin, "serve", ...process.argv.slice(2)];
await import(bin);
