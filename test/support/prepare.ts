// Runs once before the suites: migrated templates for both backends.
import { postgresUrl, preparePgliteTemplate, preparePostgresTemplate } from "./db-templates.js";

const started = Date.now();
await preparePgliteTemplate();
const url = postgresUrl();
if (url) await preparePostgresTemplate(url);
console.log(`database templates ready (pglite${url ? " + postgres" : ""}) in ${Date.now() - started} ms`);
