#!/usr/bin/env node
// What the access log costs (not a timed test): an authenticated GET (GetGroup over REST) with
// autocannon against `bulwark serve` on PGlite
//   - quiet:     --log-level warn (no line per request: how `npm run bench` runs the server)
//   - access:    --log-level info, the default: one JSON line per request, to a pipe the bench reads
//   - no-access: --log-level info with --no-access-log (successes not logged)
// every figure the median round and a ratio to `quiet` from the same run. Request metrics are
// counted in every mode (they are always on; only their exposition is optional).
// Run after `npm run build`: `node bench/access-log.mjs`.
import { Resources, compareGetGroup } from "./lib.mjs";

const resources = new Resources();
resources.install();
try {
  await compareGetGroup(
    resources,
    [
      { name: "quiet", logLevel: "warn" },
      { name: "access", logLevel: "info" },
      { name: "no-access", logLevel: "info", env: { BULWARK_NO_ACCESS_LOG: "true" } },
    ],
    { baseline: "quiet", what: "access-log" },
  );
} finally {
  await resources.cleanup();
  resources.uninstall();
}
