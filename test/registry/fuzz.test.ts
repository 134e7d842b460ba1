// Generated bad input for the registry's plain routes (/v2/ and /token): random methods, names,
// references, digests, percent-encodings, Range and Content-Range headers, credentials and
// bodies. Every answer must be below 500, in the OCI error form when it is an error, carry the
// API version header, and repeat no stack trace; the server stays up. Seeded (FUZZ_SEED).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import fc from "fast-check";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { createGroup } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const CODES = new Set([
  "BLOB_UNKNOWN",
  "BLOB_UPLOAD_INVALID",
  "BLOB_UPLOAD_UNKNOWN",
  "DIGEST_INVALID",
  "MANIFEST_BLOB_UNKNOWN",
  "MANIFEST_INVALID",
  "MANIFEST_UNKNOWN",
  "NAME_INVALID",
  "NAME_UNKNOWN",
  "SIZE_INVALID",
  "UNAUTHORIZED",
  "DENIED",
  "UNSUPPORTED",
  "TOOMANYREQUESTS",
  "RANGE_INVALID",
]);

const CASES = Math.max(100, Math.round(Number(process.env.FUZZ_CASES ?? 3000) / 6));
const SEED = Number(process.env.FUZZ_SEED ?? 20251123);

describe("registry fuzz (pglite)", () => {
  let server: TestServer;
  let credentials: string;
  const known = {
    digest: "",
    uploads: [] as string[],
  };

  before(async () => {
    server = await startTestServer("pglite");
    await createGroup(restClient(server.url, server.operatorToken), undefined, "acme");
    const token = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
    credentials = `Bearer ${token}`;
    const blob = randomBytes(100);
    known.digest = `sha256:${createHash("sha256").update(blob).digest("hex")}`;
    const pushed = await fetch(`${server.url}/v2/acme/app/blobs/uploads/?digest=${known.digest}`, {
      method: "POST",
      headers: { authorization: credentials },
      body: blob,
    });
    assert.equal(pushed.status, 201);
    for (let i = 0; i < 3; i++) {
      const started = await fetch(`${server.url}/v2/acme/app/blobs/uploads/`, {
        method: "POST",
        headers: { authorization: credentials },
      });
      known.uploads.push(started.headers.get("location")!.split("/").pop()!);
    }
  });
  after(() => server.close());

  it(`${CASES} generated requests: no 5xx, OCI errors, the version header, no stack traces`, async () => {
    const names = fc.constantFrom(
      "acme/app",
      "acme/new",
      "acme/team/app",
      "nobody/app",
      "ACME/app",
      "acme",
      "a//b",
      "acme/a..b",
    );
    const segment = fc.oneof(
      fc.constantFrom("%zz", "%E0%A4%A", "%00", "%2F", "..", "é", "x".repeat(300), "", ":", "sha256:", "sha512:abc"),
      fc.string({ maxLength: 12 }).map(encodeURIComponent),
    );
    const digest = fc.oneof(
      fc.constant(known.digest),
      fc.constant(`sha256:${"0".repeat(64)}`),
      fc.constant(`sha512:${"a".repeat(128)}`),
      fc.constant("md5:abc"),
      segment,
    );
    const reference = fc.oneof(fc.constantFrom("latest", "v1", "-bad", "a".repeat(129)), digest);
    const path = fc.oneof(
      fc.constant("/v2/"),
      fc.constant("/v2/_catalog"),
      fc.tuple(names, reference).map(([n, r]) => `/v2/${n}/manifests/${r}`),
      fc.tuple(names, digest).map(([n, d]) => `/v2/${n}/blobs/${d}`),
      names.map((n) => `/v2/${n}/blobs/uploads/`),
      fc
        .tuple(names, fc.oneof(fc.constantFrom(...known.uploads), segment))
        .map(([n, u]) => `/v2/${n}/blobs/uploads/${u}`),
      names.map((n) => `/v2/${n}/tags/list`),
      fc.tuple(names, digest).map(([n, d]) => `/v2/${n}/referrers/${d}`),
      fc.tuple(names, reference).map(([n, t]) => `/v2/${n}/_chainguard/history/${t}`),
      fc.array(segment, { maxLength: 5 }).map((s) => `/v2/${s.join("/")}`),
      fc.constant("/token"),
    );
    const query = fc.option(
      fc
        .array(
          fc.tuple(
            fc.constantFrom("digest", "n", "last", "mount", "from", "artifactType", "start", "end", "scope", "service"),
            fc.oneof(
              fc.constantFrom(known.digest, "-1", "99999999999", "acme/app", "repository:acme/app:pull,push"),
              segment,
            ),
          ),
          { maxLength: 3 },
        )
        .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join("&")),
      { nil: undefined },
    );
    const request = fc.record({
      method: fc.constantFrom("GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"),
      path,
      query,
      auth: fc.constantFrom("operator", "none", "basic-garbage", "bearer-garbage"),
      contentType: fc.option(
        fc.constantFrom(
          "application/vnd.oci.image.manifest.v1+json",
          "application/vnd.oci.image.index.v1+json",
          "application/json",
          "application/octet-stream",
          "text/plain",
        ),
        { nil: undefined },
      ),
      range: fc.option(
        fc.constantFrom("bytes=0-0", "bytes=5-1", "bytes=-3", "bytes=99999-", "items=1-2", "bytes=0-1,4-5"),
        {
          nil: undefined,
        },
      ),
      contentRange: fc.option(fc.constantFrom("0-9", "5-1", "bytes 0-9", "x-y", "0-99999999999999999999"), {
        nil: undefined,
      }),
      body: fc.option(
        fc.oneof(
          fc.constantFrom(
            "{}",
            "[]",
            "null",
            '{"schemaVersion":2}',
            '{"schemaVersion":2,"mediaType":"x/y","manifests":[{}]}',
          ),
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString("latin1")),
        ),
        { nil: undefined },
      ),
    });

    const failures: string[] = [];
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const headers: Record<string, string> = {};
        if (r.auth === "operator") headers.authorization = credentials;
        if (r.auth === "basic-garbage") headers.authorization = `Basic ${Buffer.from("_token:zzz").toString("base64")}`;
        if (r.auth === "bearer-garbage") headers.authorization = "Bearer a.b.c";
        if (r.contentType) headers["content-type"] = r.contentType;
        if (r.range) headers.range = r.range;
        if (r.contentRange) headers["content-range"] = r.contentRange;
        const url = `${server.url}${r.path}${r.query ? `?${r.query}` : ""}`;
        const body = r.method === "GET" || r.method === "HEAD" ? undefined : r.body;
        const res = await fetch(url, { method: r.method, headers, body });
        const text = r.method === "HEAD" ? "" : await res.text();
        const where = `${r.method} ${url.slice(server.url.length, 300)} → ${res.status} ${text.slice(0, 200)}`;
        if (res.status >= 500) failures.push(`5xx: ${where}`);
        if (/\bat [\w.<>]+ \(|node_modules|\/src\//.test(text)) failures.push(`stack trace: ${where}`);
        const onV2 = r.path.startsWith("/v2");
        // Answers before any route (a URL Fastify cannot decode, a path no route matches) are AIP-193.
        const aip193 = /"code":\d+,"message"/.test(text) || (r.method === "HEAD" && [400, 404].includes(res.status));
        if (onV2 && !aip193 && res.headers.get("docker-distribution-api-version") !== "registry/2.0")
          failures.push(`no API version header: ${where}`);
        if (res.status >= 400 && r.method !== "HEAD" && (onV2 || r.path === "/token")) {
          let code: unknown;
          try {
            code = (JSON.parse(text) as { errors?: { code?: unknown }[] }).errors?.[0]?.code;
          } catch {
            code = undefined;
          }
          if (!CODES.has(code as string) && !aip193) failures.push(`not an OCI error: ${where}`);
        }
        return true;
      }),
      { seed: SEED, numRuns: CASES },
    );
    assert.deepEqual(failures.slice(0, 20), []);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200, "the server is still up");
  });
});
