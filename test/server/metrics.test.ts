// Prometheus metrics (issue 29, item 1): a workload over REST, gRPC, the OCI registry, the rate
// limits, garbage collection and event delivery moves each counter by what it did, with bounded
// labels; the whole exposition parses with a Prometheus text parser; 1,000 distinct uids and
// 1,000 distinct tags add no series; /metrics is served on its own port without credentials, and
// on the main port (`--metrics`) to the platform operator's token only.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import parse from "parse-prometheus-text-format";
import { VERSION } from "../../src/core/version.js";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { registryModule } from "../../src/registry/api.js";
import { backends } from "../support/db-templates.js";
import { ok } from "../support/assertions.js";
import { serveProcess } from "../support/cli.js";
import { startEventReceiver } from "../support/event-receiver.js";
import { createGroup, createIdentity, createSubscription, type Api } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { MEDIA_TYPES, OciClient, descriptorOf, digestOf } from "../support/oci.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { until } from "../support/wait.js";

/** Every series of an exposition, `name{label="value",...}` (labels sorted) → its value. */
type Series = Map<string, number>;

function keyOf(name: string, labels: Record<string, string> = {}): string {
  const pairs = Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return `${name}{${pairs.join(",")}}`;
}

/**
 * The exposition parsed whole (the parser throws on anything malformed), then once more with
 * histograms and summaries read as untyped: the parser folds a histogram's labelled series into
 * one, so its `_bucket`, `_sum` and `_count` samples are read as series of their own.
 */
function seriesOf(text: string): Series {
  const families = parse(text);
  assert.ok(families.length > 0, "the exposition has metric families");
  for (const family of families) assert.match(family.name, /^[a-zA-Z_:][a-zA-Z0-9_:]*$/, family.name);
  const series: Series = new Map();
  for (const family of parse(text.replace(/^# TYPE (\S+) (?:histogram|summary)$/gm, "# TYPE $1 untyped")))
    for (const sample of family.metrics) series.set(keyOf(family.name, sample.labels), Number(sample.value));
  return series;
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<Series> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return seriesOf(text);
}

/** How much a series moved between two scrapes (absent: 0). */
function moved(before: Series, after: Series, name: string, labels: Record<string, string> = {}): number {
  const key = keyOf(name, labels);
  return (after.get(key) ?? 0) - (before.get(key) ?? 0);
}

const FAST_DELIVERY = {
  allowInsecureSinks: true,
  deliveryBackoffMinMs: 5,
  deliveryBackoffMaxMs: 40,
  deliveryPollMs: 20,
  deliveryRetryForMs: 3 * 3600_000,
};

const MISSING = () => randomBytes(20).toString("hex");

for (const backend of backends()) {
  describe(`metrics [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let oci: OciClient;
    let metricsUrl: string;
    const scrapeOwn = () => scrape(metricsUrl);

    before(async () => {
      server = await startTestServer(backend, {
        metrics: { port: 0, onMainPort: true },
        // Only failed authentications are limited (tightly): the workload below spends that budget.
        rateLimits: { failedAuthentication: { perSecond: 0.001, burst: 2 } },
        events: FAST_DELIVERY,
      });
      assert.ok(server.metricsPort, "the metrics port is reported");
      metricsUrl = `http://127.0.0.1:${server.metricsPort}/metrics`;
      api = restClient(server.url, server.operatorToken);
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      oci = new OciClient(server.url, { bearer: registryToken });
      await createGroup(api, undefined, "acme");
    });
    after(() => server?.close());

    it("counts REST and gRPC requests by route template, method, status and code", async () => {
      const grpc = operatorGrpc(server, GroupsService);
      try {
        const before = await scrapeOwn();
        const group = ok(await api.post("/iam/v2beta1/groups", { name: "metrics-rest" }));
        ok(await api.get(`/iam/v2beta1/groups/${group.uid}`));
        assert.equal((await api.get(`/iam/v2beta1/groups/${MISSING()}`)).status, 404);
        ok(await api.get(`/iam/v2beta1/groups`));
        await grpc.client.listGroups({});
        await assert.rejects(grpc.client.deleteGroup({ uid: "not a uid" }), (err: ConnectError) => {
          assert.equal(err.code, Code.InvalidArgument);
          return true;
        });
        await assert.rejects(grpc.client.deleteGroup({ uid: MISSING() }), (err: ConnectError) => {
          assert.equal(err.code, Code.NotFound);
          return true;
        });
        // Connect over HTTP/1.1 JSON: a method the service serves, and one it does not have.
        const connect = (method: string) =>
          fetch(`${server.url}/chainguard.platform.iam.v2beta1.GroupsService/${method}`, {
            method: "POST",
            headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json" },
            body: "{}",
          });
        assert.equal((await connect("ListGroups")).status, 200);
        assert.equal((await connect("NoSuchMethod")).status, 404);
        const after = await scrapeOwn();
        const rest = (method: string, route: string, status: string) => ({
          protocol: "http",
          method,
          route,
          status,
          code: "",
        });
        const requests = "bulwark_http_requests_total";
        assert.equal(moved(before, after, requests, rest("POST", "/iam/v2beta1/groups/{parent=**}", "200")), 1);
        assert.equal(moved(before, after, requests, rest("GET", "/iam/v2beta1/groups/{uid=**}", "200")), 1);
        assert.equal(moved(before, after, requests, rest("GET", "/iam/v2beta1/groups/{uid=**}", "404")), 1);
        assert.equal(moved(before, after, requests, rest("GET", "/iam/v2beta1/groups", "200")), 1);
        const rpc = (method: string, status: string, code: string) => ({
          protocol: "grpc",
          method: "POST",
          route: `/chainguard.platform.iam.v2beta1.GroupsService/${method}`,
          status,
          code,
        });
        assert.equal(moved(before, after, requests, rpc("ListGroups", "200", "OK")), 1);
        assert.equal(moved(before, after, requests, rpc("DeleteGroup", "400", "InvalidArgument")), 1);
        assert.equal(moved(before, after, requests, rpc("DeleteGroup", "404", "NotFound")), 1);
        const connectRoute = "/chainguard.platform.iam.v2beta1.GroupsService/ListGroups";
        assert.equal(
          moved(before, after, requests, {
            ...rpc("ListGroups", "200", "OK"),
            protocol: "connect",
            route: connectRoute,
          }),
          1,
        );
        // A method the service does not have is no route (Connect's UNIMPLEMENTED): its path is never a label.
        assert.equal(
          moved(before, after, requests, {
            protocol: "http",
            method: "POST",
            route: "(no route)",
            status: "404",
            code: "Unimplemented",
          }),
          1,
        );
        for (const key of after.keys()) assert.doesNotMatch(key, /NoSuchMethod/, key);
        // The latency histogram counts the same requests, under the same labels.
        const count = "bulwark_http_request_duration_seconds_count";
        assert.equal(moved(before, after, count, rest("GET", "/iam/v2beta1/groups/{uid=**}", "404")), 1);
        assert.equal(moved(before, after, count, rpc("DeleteGroup", "404", "NotFound")), 1);
        // Bodies: the create's JSON went in, every answer came out.
        const created = { protocol: "http", method: "POST", route: "/iam/v2beta1/groups/{parent=**}" };
        assert.equal(
          moved(before, after, "bulwark_http_request_bytes_total", created),
          Buffer.byteLength(JSON.stringify({ name: "metrics-rest" })),
        );
        assert.ok(moved(before, after, "bulwark_http_response_bytes_total", created) > 0);
        // Every statement was timed by kind; the SQL text is no label.
        assert.ok(moved(before, after, "bulwark_db_query_duration_seconds_count", { statement: "select" }) > 0);
        assert.ok(moved(before, after, "bulwark_db_query_duration_seconds_count", { statement: "insert" }) > 0);
        for (const key of after.keys())
          if (key.startsWith("bulwark_db_query"))
            assert.match(key, /statement="(select|insert|update|delete|begin|commit|rollback|savepoint|other)"/, key);
      } finally {
        grpc.close();
      }
    });

    it("counts registry bytes, pushes and pulls by outcome, and garbage collections with what they freed", async () => {
      const before = await scrapeOwn();
      const layer = randomBytes(3000);
      const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers" } }));
      assert.equal((await oci.postBlob("acme/app", layer)).status, 201);
      assert.equal((await oci.postBlob("acme/app", config)).status, 201);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.ociManifest,
        config: descriptorOf(MEDIA_TYPES.ociConfig, config),
        layers: [descriptorOf(MEDIA_TYPES.ociLayer, layer)],
      });
      assert.equal((await oci.putManifest("acme/app", "v1", manifest, MEDIA_TYPES.ociManifest)).status, 201);
      const pulled = await oci.getManifest("acme/app", "v1");
      assert.equal(pulled.status, 200);
      assert.equal((await oci.getManifest("acme/app", "v1", "HEAD")).status, 200);
      const blob = await oci.get(`/v2/acme/app/blobs/${digestOf(layer)}`);
      assert.equal(blob.status, 200);
      assert.equal((await oci.getManifest("acme/app", "no-such-tag")).status, 404);
      const dangling = JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.ociManifest,
        config: descriptorOf(MEDIA_TYPES.ociConfig, "never pushed"),
        layers: [],
      });
      assert.equal((await oci.putManifest("acme/app", "v2", dangling, MEDIA_TYPES.ociManifest)).status, 400);
      // Garbage: a blob nothing names, collected at once (no grace).
      const garbage = randomBytes(500);
      assert.equal((await oci.postBlob("acme/app", garbage)).status, 201);
      assert.equal((await oci.delete(`/v2/acme/app/blobs/${digestOf(garbage)}`)).status, 202);
      const registry = server.exportsOf(registryModule);
      const dryRun = await registry.collectGarbage({ graceMs: 0, dryRun: true });
      const report = await registry.collectGarbage({ graceMs: 0 });
      assert.ok(report.blobs >= 1 && report.bytes >= garbage.length, JSON.stringify(report));
      const after = await scrapeOwn();

      assert.equal(
        moved(before, after, "bulwark_registry_received_bytes_total"),
        layer.length + config.length + garbage.length,
      );
      assert.equal(moved(before, after, "bulwark_registry_sent_bytes_total", { kind: "blob" }), layer.length);
      assert.equal(
        moved(before, after, "bulwark_registry_sent_bytes_total", { kind: "manifest" }),
        Buffer.byteLength(manifest),
      );
      assert.equal(moved(before, after, "bulwark_registry_pushes_total", { outcome: "ok" }), 1);
      assert.equal(moved(before, after, "bulwark_registry_pushes_total", { outcome: "MANIFEST_BLOB_UNKNOWN" }), 1);
      assert.equal(moved(before, after, "bulwark_registry_pulls_total", { outcome: "ok" }), 1, "GETs, not HEADs");
      assert.equal(moved(before, after, "bulwark_registry_pulls_total", { outcome: "MANIFEST_UNKNOWN" }), 1);
      // The dry run is no collection.
      assert.ok(dryRun.blobs >= 1);
      assert.equal(moved(before, after, "bulwark_registry_gc_runs_total", { outcome: "ok" }), 1);
      assert.equal(moved(before, after, "bulwark_registry_gc_freed_blobs_total"), report.blobs);
      assert.equal(moved(before, after, "bulwark_registry_gc_freed_bytes_total"), report.bytes);
      assert.equal(moved(before, after, "bulwark_registry_gc_freed_manifests_total"), report.manifests);
      // The HTTP view of the same pushes: the blob bodies under their template.
      assert.equal(
        moved(before, after, "bulwark_http_request_bytes_total", {
          protocol: "http",
          method: "POST",
          route: "/v2/{name}/blobs/uploads/",
        }),
        layer.length + config.length + garbage.length,
      );
      assert.equal(
        moved(before, after, "bulwark_http_requests_total", {
          protocol: "http",
          method: "GET",
          route: "/v2/{name}/manifests/{reference}",
          status: "404",
          code: "",
        }),
        1,
      );
    });

    it("counts rate-limit refusals by which limit refused", async () => {
      const before = await scrapeOwn();
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await restClient(server.url, "not-a-token").get("/iam/v2beta1/groups")).status);
      assert.deepEqual(statuses, [401, 401, 429]);
      const after = await scrapeOwn();
      assert.equal(
        moved(before, after, "bulwark_rate_limit_refusals_total", { limit: "failed_authentication_address" }),
        1,
      );
    });

    it("counts delivery attempts by outcome and reads the outbox's depth at scrape", async () => {
      const org = await createGroup(api, undefined, "metrics-events");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      let accepting = false;
      receiver.answer = () => ({ status: accepting ? 200 : 503 });
      try {
        const before = await scrapeOwn();
        await createSubscription(api, org.uid, receiver.url);
        await createGroup(api, org.uid, "child");
        // Refused while the receiver says 503: the head delivery is retried, the rest wait behind it.
        await until(() => (receiver.all.length >= 2 ? true : undefined), "two refused attempts");
        const held = await scrapeOwn();
        assert.ok(held.get(keyOf("bulwark_events_deliveries_pending"))! >= 1, "deliveries pending");
        assert.ok(held.get(keyOf("bulwark_events_oldest_pending_delivery_age_seconds"))! >= 0);
        assert.ok(moved(before, held, "bulwark_events_delivery_attempts_total", { outcome: "failed" }) >= 2);
        accepting = true;
        const after = await until(async () => {
          const s = await scrapeOwn();
          const delivered = moved(before, s, "bulwark_events_delivery_attempts_total", { outcome: "delivered" });
          const pending = s.get(keyOf("bulwark_events_deliveries_pending"));
          return pending === 0 && delivered === receiver.accepted().length ? s : undefined;
        }, "every delivery made and counted");
        assert.ok(receiver.accepted().length >= 1);
        assert.equal(
          moved(before, after, "bulwark_events_delivery_attempts_total", { outcome: "failed" }),
          receiver.all.length - receiver.accepted().length,
        );
        assert.equal(after.get(keyOf("bulwark_events_deliveries_pending")), 0);
        assert.equal(after.get(keyOf("bulwark_events_oldest_pending_delivery_age_seconds")), 0);
        assert.equal(moved(before, after, "bulwark_events_deliveries_failed_total"), 0);
      } finally {
        await receiver.close();
      }
    });

    it("exposes the queues, the database pool, the process and the build", async () => {
      const series = await scrapeOwn();
      assert.equal(series.get(keyOf("bulwark_build_info", { version: VERSION })), 1);
      for (const name of [
        "bulwark_images_report_queue_depth",
        "bulwark_images_advisory_changes_pending",
        "bulwark_process_cpu_user_seconds_total",
        "bulwark_process_start_time_seconds",
        "bulwark_nodejs_eventloop_lag_seconds",
        "bulwark_nodejs_heap_size_used_bytes",
      ])
        assert.ok((series.get(keyOf(name)) ?? -1) >= 0, name);
      for (const state of ["pending", "failed"])
        assert.ok((series.get(keyOf("bulwark_images_inventory_queue_depth", { state })) ?? -1) >= 0, state);
      const pool = series.get(keyOf("bulwark_db_pool_max_connections"));
      if (backend === "postgres") {
        assert.equal(pool, 10);
        const total = series.get(keyOf("bulwark_db_pool_connections"))!;
        assert.ok(total >= 1 && total <= 10, String(total));
        assert.ok(series.get(keyOf("bulwark_db_pool_idle_connections"))! <= total);
        assert.equal(series.get(keyOf("bulwark_db_pool_waiting_queries")), 0);
      } else assert.equal(pool, undefined, "the embedded database has no pool");
      assert.equal(series.get(keyOf("bulwark_metrics_collect_failures_total", { collector: "events" })), 0);
      assert.equal(series.get(keyOf("bulwark_metrics_collect_failures_total", { collector: "images" })), 0);
    });

    it("1,000 distinct uids and 1,000 distinct tags add no series: labels are templates, never paths", async () => {
      const uids = Array.from({ length: 1000 }, MISSING);
      const tags = Array.from({ length: 1000 }, (_, i) => `tag-${i}-${randomBytes(4).toString("hex")}`);
      const getGroup = async (uid: string) => assert.equal((await api.get(`/iam/v2beta1/groups/${uid}`)).status, 404);
      const getTag = async (tag: string) => assert.equal((await oci.getManifest("acme/app", tag)).status, 404);
      // Once each first, so every series these requests touch exists before the count.
      await getGroup(MISSING());
      await getTag("warm-up");
      const before = await scrapeOwn();
      const work = [...uids.map((uid) => () => getGroup(uid)), ...tags.map((tag) => () => getTag(tag))];
      // A few at a time: the machine is shared.
      for (let i = 0; i < work.length; i += 8) await Promise.all(work.slice(i, i + 8).map((run) => run()));
      const after = await scrapeOwn();
      // The process's own families (GC kinds, heap spaces) may gain series as it runs: they carry
      // no request's labels.
      const ours = (s: Series) =>
        [...s.keys()].filter((k) => !k.startsWith("bulwark_process_") && !k.startsWith("bulwark_nodejs_")).sort();
      assert.deepEqual(ours(after), ours(before));
      const route = { protocol: "http", method: "GET", status: "404", code: "" };
      assert.equal(
        moved(before, after, "bulwark_http_requests_total", { ...route, route: "/iam/v2beta1/groups/{uid=**}" }),
        1000,
      );
      assert.equal(
        moved(before, after, "bulwark_http_requests_total", { ...route, route: "/v2/{name}/manifests/{reference}" }),
        1000,
      );
      assert.equal(moved(before, after, "bulwark_registry_pulls_total", { outcome: "MANIFEST_UNKNOWN" }), 1000);
      const text = [...after.keys()].join("\n");
      for (const value of [...uids.slice(0, 50), ...tags.slice(0, 50)]) assert.ok(!text.includes(value), value);
    });

    it("serves only GET /metrics on its own port, without credentials", async () => {
      const base = `http://127.0.0.1:${server.metricsPort}`;
      const other = await fetch(`${base}/healthz`);
      assert.equal(other.status, 404);
      assert.equal(((await other.json()) as { code: number }).code, Code.NotFound);
      const post = await fetch(`${base}/metrics`, { method: "POST", body: "x" });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get("allow"), "GET, HEAD");
      assert.equal(((await post.json()) as { code: number }).code, Code.Unimplemented);
      const head = await fetch(`${base}/metrics`, { method: "HEAD" });
      assert.equal(head.status, 200);
    });

    it("serves /metrics on the main port to the operator's token only", async () => {
      const url = `${server.url}/metrics`;
      const anonymous = await fetch(url);
      assert.equal(anonymous.status, 401);
      assert.equal(((await anonymous.json()) as { code: number }).code, Code.Unauthenticated);
      const tenantGroup = await createGroup(api, undefined, "metrics-tenant");
      const identity = await createIdentity(api, tenantGroup.uid, "scraper", "scraper-subject");
      const tenant = await fetch(url, { headers: { authorization: `Bearer ${await server.tokenFor(identity.uid)}` } });
      assert.equal(tenant.status, 403, await tenant.text());
      const series = await scrape(url, { authorization: `Bearer ${server.operatorToken}` });
      assert.ok(series.has(keyOf("bulwark_build_info", { version: VERSION })));
    });
  });
}

describe("bulwark serve --metrics-port", () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "bulwark-metrics-"));
  });
  after(() => rm(dataDir, { recursive: true, force: true }));

  it("serves /metrics on its own port; the main port has none unless --metrics, and then for the operator", async () => {
    const served = await serveProcess(["--port", "0", "--metrics-port", "0", "--data-dir", join(dataDir, "a")]);
    try {
      const port = /metrics on port (\d+)/.exec(served.lines.join("\n"))?.[1];
      assert.ok(port, served.lines.join("\n"));
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(res.status, 200);
      const series = seriesOf(await res.text());
      assert.equal(series.get(keyOf("bulwark_build_info", { version: VERSION })), 1);
      assert.equal((await fetch(`${served.url}/metrics`)).status, 404, "no /metrics on the main port");
    } finally {
      assert.equal(await served.stop(), 0);
    }
    const onMain = await serveProcess(["--port", "0", "--data-dir", join(dataDir, "b")], { BULWARK_METRICS: "true" });
    try {
      assert.ok(!/metrics on port/.test(onMain.lines.join("\n")));
      assert.equal((await fetch(`${onMain.url}/metrics`)).status, 401, "the main port's /metrics wants a token");
    } finally {
      assert.equal(await onMain.stop(), 0);
    }
  });
});
