// Numbered migrations, applied in order by Kysely's Migrator. Append; never edit a released one.
import type { Migration } from "kysely";
import * as m001 from "./001_groups.js";
import * as m002 from "./002_iam.js";
import * as m003 from "./003_signing_keys.js";
import * as m004 from "./004_login_sessions.js";

export const migrations: Record<string, Migration> = {
  "001_groups": m001,
  "002_iam": m002,
  "003_signing_keys": m003,
  "004_login_sessions": m004,
};
