// Runs once before the suites: the build the CLI suites run (bin/bulwark.js runs dist/bundle/),
// migrated templates for both backends, and what a new data directory's initdb makes.
import { build } from "../../scripts/build.mjs";
import { postgresUrl, prepareInitdbTemplate, preparePgliteTemplate, preparePostgresTemplate } from "./db-templates.js";

const started = Date.now();
// Skipped when dist/ already holds the build of the present sources (scripts/build.mjs).
const built = build({ ifChanged: true });
console.log(`build ${built ? "ready" : "up to date"} in ${Date.now() - started} ms`);
await Promise.all([preparePgliteTemplate(), prepareInitdbTemplate()]);
const url = postgresUrl();
if (url) await preparePostgresTemplate(url);
console.log(`database templates ready (pglite${url ? " + postgres" : ""}) in ${Date.now() - started} ms`);
