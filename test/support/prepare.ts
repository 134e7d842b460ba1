// Runs once before the suites: the build the CLI suites run (bin/bulwark.js runs dist/bundle/), and
// migrated templates for both backends.
import { execFileSync } from "node:child_process";
import { postgresUrl, preparePgliteTemplate, preparePostgresTemplate } from "./db-templates.js";

const started = Date.now();
execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], { stdio: "inherit" });
execFileSync(process.execPath, ["scripts/bundle.mjs"], { stdio: "inherit" });
console.log(`build ready in ${Date.now() - started} ms`);
await preparePgliteTemplate();
const url = postgresUrl();
if (url) await preparePostgresTemplate(url);
console.log(`database templates ready (pglite${url ? " + postgres" : ""}) in ${Date.now() - started} ms`);
