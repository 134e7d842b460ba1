// When `bulwark serve` traces (src/server/tracing.ts tracingFromEnv): only when the standard OTLP
// endpoint variable (or the traces one) is set, and not when the SDK is disabled; and what a span
// may be named after (src/platform/tracing.ts operationOf).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { tracingFromEnv } from "../../src/server/tracing.js";
import { operationOf } from "../../src/platform/tracing.js";

describe("tracing from the environment", () => {
  it("is off unless an OTLP endpoint is set", () => {
    assert.equal(tracingFromEnv({}), undefined);
    assert.equal(tracingFromEnv({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" }), undefined);
    assert.equal(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " }), undefined);
    assert.deepEqual(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), {});
    assert.deepEqual(tracingFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }), {});
  });

  it("is off when the SDK is disabled or the traces exporter is none", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    assert.equal(tracingFromEnv({ ...endpoint, OTEL_SDK_DISABLED: "true" }), undefined);
    assert.equal(tracingFromEnv({ ...endpoint, OTEL_TRACES_EXPORTER: "none" }), undefined);
    assert.deepEqual(tracingFromEnv({ ...endpoint, OTEL_SDK_DISABLED: "false" }), {});
  });

  it("names a statement's span by its first keyword", () => {
    assert.equal(operationOf('select "uid" from "groups" where "uid" = $1'), "SELECT");
    assert.equal(operationOf("  insert into events values ($1)"), "INSERT");
    assert.equal(operationOf("begin"), "BEGIN");
    assert.equal(operationOf("(select 1)"), "QUERY");
  });
});
