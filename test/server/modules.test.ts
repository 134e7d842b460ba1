// The module contract as the server enforces it when it starts: a module binds exactly the
// services it declares; exactly one module provides the authorizer; a module may use what an
// earlier module exports, not a later one. Composition only (no storage behaviour), so PGlite.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { authModule } from "../../src/auth/module.js";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { iamModule } from "../../src/iam/module.js";
import type { FeatureModule, ModuleContext } from "../../src/platform/module.js";
import { MODULES } from "../../src/server/modules.js";
import { startServer, type RunningServer } from "../../src/server/start.js";
import { clonePglite } from "../support/db-templates.js";
import { ERROR_DOMAIN } from "../support/server.js";
import { signal, withinHang } from "../support/wait.js";

async function start(modules: readonly FeatureModule<any, any>[]): Promise<RunningServer> {
  const logger = pino({ level: "silent" });
  const config = { port: 0, host: "127.0.0.1", dataDir: "", errorDomain: ERROR_DOMAIN, logger };
  return startServer({ ...config, pglite: await clonePglite(), modules });
}

/** A module with no tables whose start runs `body` and binds nothing. */
function probe(name: string, body: (ctx: ModuleContext) => unknown, services: FeatureModule["services"] = []) {
  const module: FeatureModule<Record<string, never>, unknown> = {
    name,
    migrations: {},
    services,
    listings: {},
    repositories: () => ({}),
    async start(ctx) {
      return { bindings: [], exports: body(ctx) };
    },
  };
  return module;
}

/**
 * The tables of every module but iam and auth, without the modules (the test template has them
 * all; the registry needs the auth module's exports). A new module's migrations join by themselves.
 */
const otherTables: FeatureModule<any, any> = {
  ...probe("other modules' tables", () => ({})),
  migrations: Object.assign(
    {},
    ...MODULES.filter((m) => m !== iamModule && m !== authModule).map((m) => m.migrations),
  ) as FeatureModule["migrations"],
};

describe("module contract at start", () => {
  it("a module must bind exactly the services it declares", async () => {
    const liar = probe("liar", () => ({}), [GroupsService]);
    await assert.rejects(start([...MODULES, liar]), /module liar declares \[.*GroupsService\] but binds \[\]/);
  });

  it("exactly one module provides the authorizer", async () => {
    const withoutAuthorizer: FeatureModule<any, any> = {
      ...authModule,
      start: async (ctx) => ({ ...(await authModule.start(ctx)), authorizer: undefined }),
    };
    await assert.rejects(start([iamModule, withoutAuthorizer, otherTables]), /must provide the authorizer; found none/);
    const second: FeatureModule<any, any> = {
      ...probe("second", () => ({})),
      start: async (ctx) => ({ ...(await authModule.start(ctx)), bindings: [] }),
    };
    await assert.rejects(start([...MODULES, second]), /must provide the authorizer; found auth, second/);
  });

  it("a module reads what an earlier module exports; asking a later one fails", async () => {
    const reader = probe("reader", (ctx) => ({ issuer: ctx.exportsOf(authModule).issuer }));
    const server = await start([...MODULES, reader]);
    try {
      assert.equal((server.exportsOf(reader) as { issuer: unknown }).issuer, server.exportsOf(authModule).issuer);
    } finally {
      await server.close();
    }
    const early = probe("early", (ctx) => ctx.exportsOf(authModule));
    await assert.rejects(start([iamModule, early, authModule, otherTables]), /module auth is not running/);
  });

  it("a module reads its own settings; the grants its settings make reach every module before any starts", async () => {
    const logger = pino({ level: "silent" });
    const seen: { settings?: unknown; grants?: unknown }[] = [];
    const configured: FeatureModule<Record<string, never>, unknown, { group: string }> = {
      ...probe("configured", (ctx) => seen.push({ settings: ctx.moduleSettings, grants: ctx.sharedGrants })),
      sharedGrants: (settings) => (settings ? [{ group: settings.group, capabilities: [1] }] : []),
    };
    const server = await startServer({
      port: 0,
      host: "127.0.0.1",
      dataDir: "",
      errorDomain: ERROR_DOMAIN,
      logger,
      pglite: await clonePglite(),
      modules: [...MODULES, configured],
      sharedGrants: [{ group: "operator-choice", capabilities: [2] }],
      moduleSettings: { configured: { group: "from-settings" } } as never,
    });
    await server.close();
    assert.deepEqual(seen, [
      {
        settings: { group: "from-settings" },
        grants: [
          { group: "operator-choice", capabilities: [2] },
          { group: "from-settings", capabilities: [1] },
        ],
      },
    ]);
  });

  it("settings for a module that does not run are refused", async () => {
    const pglite = await clonePglite();
    try {
      await assert.rejects(
        startServer({
          port: 0,
          host: "127.0.0.1",
          dataDir: "",
          errorDomain: ERROR_DOMAIN,
          logger: pino({ level: "silent" }),
          pglite,
          modules: [iamModule, authModule, otherTables],
          moduleSettings: { registry: { gcGraceMs: 1 } },
        }),
        /settings are given for module registry, which does not run/,
      );
    } finally {
      await pglite.close();
    }
  });
});

describe("periodic tasks", () => {
  /** A module whose one task runs `run` every millisecond. */
  function withTask(run: (ctx: ModuleContext) => Promise<void>) {
    const module: FeatureModule<Record<string, never>, unknown> = {
      ...probe("scheduled", () => ({})),
      async start(ctx) {
        return { bindings: [], exports: {}, tasks: [{ name: "test task", everyMs: 1, run: () => run(ctx) }] };
      },
    };
    return module;
  }

  it("a run never overlaps the previous one, and the schedule goes on after a failure", async () => {
    let active = 0;
    let overlaps = 0;
    let runs = 0;
    const enough = signal();
    const server = await start([
      ...MODULES,
      withTask(async () => {
        if (active++ > 0) overlaps++;
        runs++;
        try {
          // The first run outlasts many intervals: a schedule that started runs by the clock would overlap it.
          if (runs === 1) await new Promise((r) => setTimeout(r, 50));
          if (runs === 2) throw new Error("a failing run");
          if (runs === 4) enough.resolve();
        } finally {
          active--;
        }
      }),
    ]);
    try {
      await withinHang(enough.promise, "four runs of the task");
    } finally {
      await server.close();
    }
    assert.equal(overlaps, 0);
  });

  it("a stop waits for the run in progress before the database closes", async () => {
    const started = signal();
    const gate = signal();
    let finished: "query answered" | Error | undefined;
    const server = await start([
      ...MODULES,
      withTask(async (ctx) => {
        if (finished) return;
        started.resolve();
        await gate.promise;
        finished = await ctx.db
          .selectNoFrom((eb) => eb.lit(1).as("one"))
          .execute()
          .then(
            () => "query answered" as const,
            (err: Error) => err,
          );
      }),
    ]);
    await withinHang(started.promise, "the task's first run");
    let closedFirst = false;
    const closed = server.close().then(() => (closedFirst = finished === undefined));
    // Give a stop that does not wait the time to close everything before the run goes on.
    await new Promise((r) => setTimeout(r, 100));
    gate.resolve();
    await closed;
    assert.equal(closedFirst, false, "the server closed while its task was still running");
    assert.equal(finished, "query answered");
  });
});
