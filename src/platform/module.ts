// The feature-module contract. A feature (iam, auth, ...) is one folder with one public face,
// its api.ts: the FeatureModule, and the few types and functions other code uses of it (what a
// running module offers other modules is its `exports`). The server loops over the list of
// modules (server/modules.ts) for migrations, repositories, RPC services, plain HTTP routes and
// periodic upkeep, and names no feature itself.
import type { DescService } from "@bufbuild/protobuf";
import type { Migration } from "kysely";
import type { Logger } from "pino";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import type { Authorizer, CallRecorder, ServiceBinding } from "../core/service.js";
import type { Db, OpenDatabase } from "../storage/db.js";
import type { PlatformSettings, PublicUrls, SharedGrant } from "./config.js";
import type { EventJournal } from "./events.js";
import type { PlainRouter } from "./routes.js";
import type { MetricsRegistry } from "./telemetry.js";

/**
 * A feature module. `Settings` is the module's own settings: the server's configuration holds
 * them by module name (`ServerConfig.moduleSettings`), and the module reads them as
 * `ctx.moduleSettings`; absent, the module runs on its defaults.
 */
export interface FeatureModule<Repositories = unknown, Exports = unknown, Settings = unknown> {
  /** short and unique: "iam", "auth", ... */
  readonly name: string;
  /** numbered migrations ("001_groups"); the numbering is global across modules */
  readonly migrations: Readonly<Record<string, Migration>>;
  /** the proto services this module serves; `start` must bind exactly these */
  readonly services: readonly DescService[];
  /**
   * How each listed resource pages and sorts, by the item message's full name
   * ("chainguard.platform.iam.v2beta1.Group"); every List RPC's item needs one.
   */
  readonly listings: Readonly<Record<string, ListableResource>>;
  /** the module's repositories over the shared database (made once per server) */
  repositories(db: Db): Repositories;
  /**
   * The grants the module's settings make every authenticated caller hold beside its own
   * bindings (e.g. reading the public advisory groups). The server asks every module before any
   * starts; the authorizer's module gets them all in `ctx.sharedGrants`.
   */
  sharedGrants?(settings: Settings | undefined): SharedGrant[];
  /** Prepares the module (seeds, keys) and returns what it serves. */
  start(ctx: ModuleContext<Settings>): Promise<ModuleRuntime<Exports>>;
}

export interface ModuleRuntime<Exports = unknown> {
  /** one binding per entry of the module's `services` */
  bindings: ServiceBinding[];
  /** the module's plain HTTP routes (OIDC discovery, sign-in pages, the OCI /v2/ API) */
  routes?(router: PlainRouter): void;
  /** path prefixes ("/v2") also served on the registry's own port, when one is configured */
  registryPaths?: string[];
  /** how callers are authenticated and authorized: exactly one module provides it */
  authorizer?: Authorizer;
  /**
   * the events outbox every RPC passes through (records the event a method names in the
   * change's transaction): at most one module provides it, with the `journal`
   */
  recorder?: CallRecorder;
  /** where every module's events are recorded (`ctx.events`): at most one module provides it */
  journal?: EventJournal;
  /** periodic upkeep (key rotation, pruning), run while the server runs */
  tasks?: PeriodicTask[];
  /**
   * what must work for this replica to take traffic (the registry: its blob store is writable),
   * asked by every `/readyz` beside the server's own checks (the database, not shutting down)
   */
  readiness?: ReadinessCheck[];
  /** what other modules (and tests) may use of this one, through `exportsOf` */
  exports: Exports;
  /**
   * called once the server listens, with every public URL final (blanks filled from its own URL),
   * and the URL of the socket it listens on (http://<--host>:<port>: what a tool on this host calls)
   */
  listening?(urls: Readonly<PublicUrls>, listenUrl: string): Promise<void>;
  /** releases what the module holds (clients, temporary files), after the server stopped serving */
  close?(): Promise<void>;
}

/**
 * Upkeep the server runs on every replica (server/tasks.ts): first `everyMs` after start, then
 * `everyMs` after each run ends (a run never overlaps the previous one); a failure is logged and
 * the schedule goes on; a stop waits for the run in progress before the database closes. Work that
 * must happen once across replicas coordinates through the database (row locks, SKIP LOCKED).
 */
export interface PeriodicTask {
  /** in words, for the log ("registry garbage collection") */
  name: string;
  everyMs: number;
  run(): Promise<void>;
}

/**
 * One of the conditions `/readyz` reports (server/health.ts). A failure's reason goes to the
 * server's log, never to the probe: the answer names only the check. A check that costs a request
 * to another service shares concurrent runs and keeps a success for a while (`sharedProbe` in
 * platform/health.ts); the server bounds every run, so a hanging one fails as "timed out".
 */
export interface ReadinessCheck {
  /** short and stable, shown to probes: "blob store" */
  name: string;
  /** resolves when the condition holds; rejects (with the reason, for the log) when not */
  run(): Promise<void>;
}

export interface ModuleContext<Settings = unknown> {
  db: Db;
  /**
   * The database as a whole: its backend, and (embedded only) a consistent snapshot of all of it
   * (OpenDatabase.snapshot), for backups.
   */
  database: Pick<OpenDatabase, "backend" | "snapshot">;
  /** the whole server's settings */
  settings: Readonly<PlatformSettings>;
  /** this module's own settings (`ServerConfig.moduleSettings[name]`); absent: its defaults */
  moduleSettings: Settings | undefined;
  /**
   * Every grant authenticated callers hold beside their own bindings: the operator's
   * (`PlatformSettings.sharedGrants`), then those the modules' settings make (`sharedGrants`).
   */
  sharedGrants: readonly SharedGrant[];
  /** the public URLs; blanks are filled from the server's own URL once it listens */
  urls: PublicUrls;
  /** a directory for the module's files beside an on-disk embedded database; absent otherwise */
  dataDir?: string;
  logger: Logger;
  /**
   * the server's Prometheus registry: a module registers its own metrics here (names start with
   * `bulwark_`, labels bounded; see platform/telemetry.ts)
   */
  metrics: MetricsRegistry;
  lists: ListEngineDeps;
  now(): Date;
  /**
   * A module's repositories: the same instances the server uses. A module takes its own; what it
   * uses of another module is that module's `exports`.
   */
  repositoriesOf<R>(module: FeatureModule<R, unknown>): R;
  /** what an earlier module exports (modules start in list order) */
  exportsOf<E>(module: FeatureModule<unknown, E>): E;
  /**
   * Records events beside the RPCs' own (pushes, pulls, sign-ins): the journal of the module that
   * provides one, once it started (until then, and without one, nothing is recorded).
   */
  events: EventJournal;
  /** a secret shared by every replica on this database, made on first use */
  sharedSecret(name: string): Promise<Uint8Array>;
}
