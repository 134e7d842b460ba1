// The attack cases: what a hostile or broken client sends that no schema-valid message can be.
// Some are generated (malformed protobuf, wrong JSON types, random paths), the rest fixed lists
// (envelopes, malformed JSON, unknown fields, NUL in every string field, a 1 MiB uid, oversized
// query strings / headers / bodies, forged and expired tokens, raw HTTP/1.1 oddities). Every
// answer goes through the same checks (checks.ts).
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import {
  ScalarType,
  create,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { SignJWT, UnsecuredJWT, decodeJwt, exportJWK, generateKeyPair, type CryptoKey, type JWK } from "jose";
import { createPublicKey } from "node:crypto";
import { OPERATOR_SUBJECT } from "../../../src/auth/tokens.js";
import type { Api } from "../fixtures.js";
import { VIEWER_ROLE_UID } from "../fixtures.js";
import { expiredToken, issuerAt, notYetValidToken, wrongAudienceToken } from "../principals.js";
import { ERROR_DOMAIN, claimsFor, type TestServer } from "../server.js";
import { messageArb, plausibleInit, type Plausible } from "./arbitraries.js";
import { check } from "./checks.js";
import { fuzzTarget, runFixed, type Failure } from "./runner.js";
import { DEAD_ISSUER, type Seeded } from "./seed.js";
import {
  GrpcCaller,
  HANG,
  TIMEOUT_MS,
  clip,
  connectPath,
  envelope,
  messageStrings,
  rawGrpc,
  rawGrpcWeb,
  rawHttp1,
  rawHttp1Sequence,
  connectReader,
  grpcWebReader,
  readConnectAnswer,
  restReader,
  restFromJson,
  sendConnect,
  sendRest,
  type HttpRule,
  type Outcome,
  type Problem,
  type Rpc,
} from "./wire.js";

export interface AttackContext {
  server: TestServer;
  op: Api;
  rpcs: Rpc[];
  seeded: Seeded;
  grpc: GrpcCaller;
  seed: number;
  /** generated cases this suite may spend in all */
  cases: number;
  headersFor(auth: "operator" | "identity" | "none"): Record<string, string>;
}

export interface AttackSuite {
  title: string;
  /** share of the context's generated cases */
  share?: number;
  run(ctx: AttackContext): Promise<Failure[]>;
}

const MiB = 1024 * 1024;
const KB = 1000;

/** Runs `fn` over `items` with at most `limit` in flight. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

/** runFixed with a few requests in flight at once (answers are independent). */
async function fixed<T>(
  cases: T[],
  target: (c: T) => string,
  send: (c: T) => Promise<{ outcome: Outcome; inputs: string[]; mustFail?: string; http2StackLimit?: boolean }>,
  describe: (c: T) => string,
): Promise<Failure[]> {
  // A hang costs the whole time limit: after a few, the target's other cases are skipped.
  const hangs = new Map<string, number>();
  const results = await mapLimit(cases, 4, async (c) => {
    if ((hangs.get(target(c)) ?? 0) >= 3) return { c, problems: [] as Problem[] };
    const { outcome, inputs, mustFail, http2StackLimit } = await send(c);
    const problems = check(outcome, { domain: ERROR_DOMAIN, inputs, mustFail, http2StackLimit });
    if (problems.some((p) => p.kind === HANG)) hangs.set(target(c), (hangs.get(target(c)) ?? 0) + 1);
    return { c, problems };
  });
  const byCase = new Map(results.map((r) => [r.c, r.problems]));
  return runFixed(target, cases, async (c) => byCase.get(c) ?? [], describe);
}

const hex = (b: Uint8Array, n = 48) =>
  Buffer.from(b.subarray(0, n)).toString("hex") + (b.length > n ? `…(${b.length} bytes)` : "");

// ---------------------------------------------------------------------------------------------
// Protobuf bytes.

function varint(n: bigint | number): number[] {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return out;
}

const tag = (field: number, wire: number) => varint((BigInt(field) << 3n) | BigInt(wire));

function firstField(desc: DescMessage, pred: (f: DescField) => boolean): number | undefined {
  return desc.fields.find(pred)?.number;
}

/** Malformed encodings of a request of `desc`, each with a label. */
export function malformedProtoArb(desc: DescMessage, p: Plausible): fc.Arbitrary<{ label: string; bytes: Uint8Array }> {
  const str = firstField(desc, (f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) ?? 1;
  const msg = firstField(desc, (f) => f.fieldKind === "message") ?? 2;
  const u8 = (a: number[]) => new Uint8Array(a);
  const nestedGroups = (n: number) => {
    const open = tag(999, 3);
    const out = new Uint8Array(open.length * n);
    for (let i = 0; i < n; i++) out.set(open, i * open.length);
    return out;
  };
  const fixedCases: { label: string; bytes: Uint8Array }[] = [
    { label: "field number 0", bytes: u8([0x00, 0x01]) },
    { label: "wire type 6", bytes: u8([0x0e, 0x01]) },
    { label: "wire type 7", bytes: u8([0x0f]) },
    { label: "truncated varint", bytes: u8([...tag(str, 0), 0xff, 0xff]) },
    { label: "11-byte varint", bytes: u8([...tag(str, 0), ...Array(10).fill(0xff), 0x01]) },
    { label: "length past the end", bytes: u8([...tag(str, 2), 0x64, 0x61]) },
    { label: "4 GiB length", bytes: u8([...tag(str, 2), 0xff, 0xff, 0xff, 0xff, 0x0f]) },
    { label: "negative length", bytes: u8([...tag(str, 2), ...varint(-1n)]) },
    { label: "end group without a start", bytes: u8(tag(1, 4)) },
    { label: "unterminated group", bytes: u8(tag(1, 3)) },
    { label: "group ended by another field's end tag", bytes: u8([...tag(7, 3), ...tag(8, 4)]) },
    { label: "100 000 nested groups", bytes: nestedGroups(100_000) },
    { label: "invalid UTF-8 in a string field", bytes: u8([...tag(str, 2), 4, 0xff, 0xfe, 0xc0, 0x80]) },
    { label: "UTF-8-encoded surrogate in a string field", bytes: u8([...tag(str, 2), 3, 0xed, 0xa0, 0x80]) },
    { label: "string field as a varint", bytes: u8([...tag(str, 0), 0x01]) },
    { label: "string field as fixed64", bytes: u8([...tag(str, 1), 1, 2, 3, 4, 5, 6, 7, 8]) },
    { label: "message field as a varint", bytes: u8([...tag(msg, 0), 0x05]) },
    { label: "garbage inside a message field", bytes: u8([...tag(msg, 2), 2, 0xff, 0xff]) },
    { label: "highest field number", bytes: u8([...tag(536870911, 0), 1]) },
    { label: "field number above the maximum", bytes: u8([...tag(536870912, 0), 1]) },
  ];
  const mutated = fc
    .record({ m: messageArb(desc, p), at: fc.nat(), x: fc.integer({ min: 1, max: 255 }), cut: fc.boolean() })
    .map(({ m, at, x, cut }) => {
      const b = toBinary(desc, m as never);
      if (!b.length) return { label: "random byte", bytes: u8([x]) };
      const i = at % b.length;
      if (cut) return { label: `valid message cut at byte ${i}`, bytes: b.subarray(0, i || 1) };
      const out = b.slice();
      out[i] = out[i]! ^ x;
      return { label: `valid message with byte ${i} xor ${x}`, bytes: out };
    });
  return fc.oneof(
    { arbitrary: fc.constantFrom(...fixedCases), weight: 3 },
    {
      arbitrary: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => ({ label: "random bytes", bytes })),
      weight: 2,
    },
    { arbitrary: mutated, weight: 3 },
  );
}

// ---------------------------------------------------------------------------------------------
// Request messages built generically: plausible baselines and every string field.

interface Step {
  f: DescField;
  mode?: "list" | "mapKey" | "mapValue";
}

const isWkt = (d: DescMessage) => d.typeName.startsWith("google.protobuf.");

/** Every place a string can go in a request of `desc` (fields, list elements, map keys and values). */
function stringSites(desc: DescMessage, prefix: Step[] = [], depth = 0): Step[][] {
  const out: Step[][] = [];
  for (const f of desc.fields) {
    if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) out.push([...prefix, { f }]);
    else if (f.fieldKind === "list" && f.listKind === "scalar" && f.scalar === ScalarType.STRING)
      out.push([...prefix, { f, mode: "list" }]);
    else if (f.fieldKind === "map") {
      if (f.mapKey === ScalarType.STRING) out.push([...prefix, { f, mode: "mapKey" }]);
      if (f.mapKind === "scalar" && f.scalar === ScalarType.STRING) out.push([...prefix, { f, mode: "mapValue" }]);
    } else if (f.fieldKind === "message" && !isWkt(f.message) && depth < 3)
      out.push(...stringSites(f.message, [...prefix, { f }], depth + 1));
    else if (f.fieldKind === "list" && f.listKind === "message" && !isWkt(f.message) && depth < 3)
      out.push(...stringSites(f.message, [...prefix, { f, mode: "list" }], depth + 1));
  }
  return out;
}

const siteName = (steps: Step[]) =>
  steps
    .map(
      (s) =>
        s.f.name + (s.mode === "list" ? "[]" : s.mode === "mapKey" ? "{key}" : s.mode === "mapValue" ? "{value}" : ""),
    )
    .join(".");

function zeroOf(f: DescField): unknown {
  if (f.fieldKind === "map") {
    if (f.mapKind === "message") return {};
    if (f.mapKind === "enum") return 0;
    return f.scalar === ScalarType.STRING
      ? "v"
      : f.scalar === ScalarType.BOOL
        ? false
        : [3, 4, 6, 16, 18].includes(f.scalar)
          ? 0n
          : 0;
  }
  return undefined;
}

type Init = Record<string, unknown>;

function getIn(obj: Init, f: DescField): unknown {
  if (!f.oneof) return obj[f.localName];
  const o = obj[f.oneof.localName] as { case?: string; value?: unknown } | undefined;
  return o?.case === f.localName ? o.value : undefined;
}

function putIn(obj: Init, f: DescField, v: unknown): void {
  if (f.oneof) obj[f.oneof.localName] = { case: f.localName, value: v };
  else obj[f.localName] = v;
}

/** Sets the string at a site of an init object, creating what lies on the way. */
function setSite(init: Init, steps: Step[], value: string): void {
  let obj = init;
  steps.forEach((s, i) => {
    if (i === steps.length - 1) {
      if (s.mode === "list") putIn(obj, s.f, [value]);
      else if (s.mode === "mapKey") putIn(obj, s.f, { [value]: zeroOf(s.f) });
      else if (s.mode === "mapValue") putIn(obj, s.f, { k: value });
      else putIn(obj, s.f, value);
      return;
    }
    if (s.mode === "list") {
      let arr = getIn(obj, s.f) as Init[] | undefined;
      if (!Array.isArray(arr) || !arr.length) putIn(obj, s.f, (arr = [{}]));
      obj = arr[0]!;
    } else {
      let next = getIn(obj, s.f) as Init | undefined;
      if (!next || typeof next !== "object") putIn(obj, s.f, (next = {}));
      obj = next;
    }
  });
}

let baselines = 0;

/** A plausible request for the seeded rows (roles: the built-in viewer), with a fresh name. */
function baselineInit(desc: DescMessage, s: Seeded, server: TestServer): Record<string, unknown> {
  const b = { group: s.org.uid, identity: s.identity.uid, role: VIEWER_ROLE_UID, issuer: server.url };
  return plausibleInit(desc, b, `b${++baselines}`);
}

// ---------------------------------------------------------------------------------------------
// How one request goes over each protocol.

type Proto = "REST" | "Connect JSON" | "Connect binary" | "gRPC";
const ALL_PROTOCOLS: Proto[] = ["REST", "Connect JSON", "Connect binary", "gRPC"];

async function sendMessage(
  ctx: AttackContext,
  protocol: Proto,
  rpc: Rpc,
  msg: Message,
  headers: Record<string, string>,
): Promise<{ outcome: Outcome; inputs: string[]; shown: string }> {
  const desc = rpc.method.input;
  const inputs = messageStrings(desc, msg);
  const json = toJson(desc, msg as never) as JsonObject;
  switch (protocol) {
    case "REST": {
      const rule = rpc.rules[0];
      if (!rule) return { outcome: skip(), inputs, shown: "" };
      const req = restFromJson(desc, rule, json);
      return {
        outcome: await sendRest(ctx.server.url, req, headers),
        inputs: [...inputs, req.url, req.body ?? ""],
        shown: `curl -X ${req.method} '${clip(req.url, 200)}'${req.body === undefined ? "" : ` --data ${clip(req.body, 200)}`}`,
      };
    }
    case "Connect JSON":
    case "Connect binary": {
      const binary = protocol === "Connect binary";
      const body = binary ? toBinary(desc, msg as never) : JSON.stringify(json);
      return {
        outcome: await sendConnect(
          ctx.server.url,
          connectPath(rpc.service, rpc.method),
          binary ? "application/proto" : "application/json",
          body,
          headers,
          protocol,
        ),
        inputs: [...inputs, typeof body === "string" ? body : ""],
        shown: `POST ${connectPath(rpc.service, rpc.method)} ${binary ? "(proto) " : ""}${clip(JSON.stringify(json), 200)}`,
      };
    }
    case "gRPC":
      return {
        outcome: await ctx.grpc.call(rpc.service, rpc.method, msg, headers),
        inputs,
        shown: `gRPC ${connectPath(rpc.service, rpc.method)} ${clip(JSON.stringify(json), 200)}`,
      };
  }
}

/** An outcome that checks clean (a case that does not apply). */
const skip = (): Outcome => ({ protocol: "-", code: 0, errorInfos: [], texts: [], problems: [] });

// ---------------------------------------------------------------------------------------------
// Tokens that must be refused.

export interface BadCredential {
  name: string;
  header?: string;
  /** headers fetch and HTTP/2 refuse to send (NUL, CR, LF): only raw HTTP/1.1 */
  rawOnly?: boolean;
  /** whether a 2xx is a security failure */
  mustFail: boolean;
}

export async function badCredentials(server: TestServer, s: Seeded): Promise<BadCredential[]> {
  // A fresh connection (not the pool's): an earlier case may have left a pooled one reset.
  const jwks = JSON.parse(
    (await rawHttp1(server.url, `GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)).body ??
      "{}",
  ) as { keys: JWK[] };
  const realKid = jwks.keys[0]!.kid!;
  const claims = claimsFor(server, OPERATOR_SUBJECT);
  const foreign = await generateKeyPair("ES256");
  const foreignPublic = await exportJWK(foreign.publicKey);
  const pem = createPublicKey({ key: jwks.keys[0] as import("node:crypto").JsonWebKey, format: "jwk" }).export({
    type: "spki",
    format: "pem",
  }) as string;
  const b64 = (o: unknown) => Buffer.from(typeof o === "string" ? o : JSON.stringify(o)).toString("base64url");
  // JWS by hand (jose refuses to sign some of these headers): ES256, signature r || s.
  const sign = async (c: object, header: Record<string, unknown>, key: CryptoKey = foreign.privateKey) => {
    const input = `${b64({ alg: "ES256", typ: "JWT", ...header })}.${b64(c)}`;
    const sig = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, key, Buffer.from(input));
    return `${input}.${Buffer.from(sig).toString("base64url")}`;
  };
  const hs = (secret: Uint8Array) =>
    new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: realKid, typ: "JWT" }).sign(secret);
  const real = s.identityToken;
  const [h, , sig] = real.split(".");
  const forged = Buffer.from(JSON.stringify({ ...decodeJwt(real), sub: OPERATOR_SUBJECT })).toString("base64url");
  const loopbackIssuer = issuerAt(server, () => new Date(), { issuer: DEAD_ISSUER });
  const wrongIssuer = (
    await loopbackIssuer.mint({ subject: OPERATOR_SUBJECT, audience: [server.tokens.urls.apiAudience] })
  ).token;
  const list: BadCredential[] = [
    { name: "no Authorization header", mustFail: true },
    { name: "Bearer garbage", header: "Bearer garbage", mustFail: true },
    { name: "Bearer a.b.c", header: "Bearer a.b.c", mustFail: true },
    { name: "Bearer with an empty token", header: "Bearer ", mustFail: true },
    { name: "Basic scheme", header: `Basic ${b64("operator:secret")}`, mustFail: true },
    { name: "payload swapped for the operator's", header: `Bearer ${h}.${forged}.${sig}`, mustFail: true },
    { name: "truncated signature", header: `Bearer ${real.slice(0, -8)}`, mustFail: true },
    { name: "alg none", header: `Bearer ${new UnsecuredJWT(claims).encode()}`, mustFail: true },
    {
      name: "alg none with a real kid and an empty signature",
      header: `Bearer ${b64({ alg: "none", kid: realKid })}.${b64(claims)}.`,
      mustFail: true,
    },
    {
      name: "alg NONE (upper case)",
      header: `Bearer ${b64({ alg: "NONE", kid: realKid })}.${b64(claims)}.`,
      mustFail: true,
    },
    {
      name: "HS256 keyed with the public key's PEM",
      header: `Bearer ${await hs(new TextEncoder().encode(pem))}`,
      mustFail: true,
    },
    {
      name: "HS256 keyed with the public JWK's JSON",
      header: `Bearer ${await hs(new TextEncoder().encode(JSON.stringify(jwks.keys[0])))}`,
      mustFail: true,
    },
    {
      name: "foreign ES256 key with the real kid",
      header: `Bearer ${await sign(claims, { kid: realKid })}`,
      mustFail: true,
    },
    { name: "foreign ES256 key without a kid", header: `Bearer ${await sign(claims, {})}`, mustFail: true },
    {
      name: "foreign key embedded in the header (jwk)",
      header: `Bearer ${await sign(claims, { jwk: foreignPublic })}`,
      mustFail: true,
    },
    {
      name: "jku pointing at a loopback URL",
      header: `Bearer ${await sign(claims, { kid: realKid, jku: "http://127.0.0.1:9/jwks.json" })}`,
      mustFail: true,
    },
    {
      name: "x5u pointing at a loopback URL",
      header: `Bearer ${await sign(claims, { kid: realKid, x5u: "http://127.0.0.1:9/cert.pem" })}`,
      mustFail: true,
    },
    { name: "crit header", header: `Bearer ${await sign(claims, { kid: realKid, crit: ["exp"] })}`, mustFail: true },
    {
      name: "kid path traversal",
      header: `Bearer ${await sign(claims, { kid: "../../../../etc/passwd" })}`,
      mustFail: true,
    },
    { name: "kid SQL injection", header: `Bearer ${await sign(claims, { kid: "x' OR '1'='1" })}`, mustFail: true },
    {
      name: "kid of 10 000 characters",
      header: `Bearer ${await sign(claims, { kid: "k".repeat(10_000) })}`,
      mustFail: true,
    },
    { name: "kid as a number", header: `Bearer ${await sign(claims, { kid: 7 })}`, mustFail: true },
    { name: "header not JSON", header: `Bearer ${b64("not json")}.${b64(claims)}.${sig}`, mustFail: true },
    { name: "payload not JSON", header: `Bearer ${h}.${b64("not json")}.${sig}`, mustFail: true },
    { name: "payload a JSON array", header: `Bearer ${h}.${b64([1, 2])}.${sig}`, mustFail: true },
    {
      name: "five segments (JWE shape)",
      header: `Bearer ${h}.${b64("x")}.${b64("y")}.${b64("z")}.${sig}`,
      mustFail: true,
    },
    { name: "10 000 dots", header: `Bearer ${".".repeat(10_000)}`, mustFail: true },
    { name: "expired", header: `Bearer ${await expiredToken(server, s.identity.uid)}`, mustFail: true },
    { name: "not yet valid", header: `Bearer ${await notYetValidToken(server, s.identity.uid)}`, mustFail: true },
    { name: "wrong issuer (loopback)", header: `Bearer ${wrongIssuer}`, mustFail: true },
    { name: "wrong audience", header: `Bearer ${await wrongAudienceToken(server, OPERATOR_SUBJECT)}`, mustFail: true },
    {
      name: "valid token of an unknown subject",
      header: `Bearer ${await server.tokenFor("fuzz-nobody")}`,
      mustFail: true,
    },
    {
      name: "valid token of a group uid as subject",
      header: `Bearer ${await server.tokenFor(s.org.uid)}`,
      mustFail: true,
    },
    {
      name: "token with a NUL",
      header: `Bearer ${real.slice(0, 20)}\u0000${real.slice(20)}`,
      rawOnly: true,
      mustFail: true,
    },
    {
      name: "token folded over two lines (obs-fold)",
      header: `Bearer ${real.slice(0, 40)}\r\n ${real.slice(40)}`,
      rawOnly: true,
      mustFail: true,
    },
    {
      name: "token with a bare CR",
      header: `Bearer ${real.slice(0, 40)}\r${real.slice(40)}`,
      rawOnly: true,
      mustFail: true,
    },
    { name: "two Bearer tokens", header: `Bearer ${real} Bearer ${server.operatorToken}`, mustFail: true },
  ];
  // Tokens signed with the server's own key but with claims of the wrong shape: the authorizer's
  // handling after a good signature. Skipped if the key cannot be reached from here.
  try {
    const keys = (
      server.tokens as unknown as { keys: { signingKey(): Promise<{ kid: string; privateKey: CryptoKey }> } }
    ).keys;
    const key = await keys.signingKey();
    const own = (c: object) => sign(c, { kid: key.kid }, key.privateKey);
    const with_ = (extra: Record<string, unknown>) => own(claimsFor(server, s.identity.uid, extra));
    list.push(
      {
        name: "own key: sub with a NUL",
        header: `Bearer ${await with_({ sub: `${s.identity.uid}\u0000x` })}`,
        mustFail: true,
      },
      {
        name: "own key: sub of 100 000 characters",
        header: `Bearer ${await with_({ sub: "s".repeat(100_000) })}`,
        mustFail: true,
      },
      {
        name: "own key: sub an object",
        header: `Bearer ${await with_({ sub: { uid: s.identity.uid } })}`,
        mustFail: true,
      },
      { name: "own key: empty sub", header: `Bearer ${await with_({ sub: "" })}`, mustFail: true },
      { name: "own key: exp as a string", header: `Bearer ${await with_({ exp: "99999999999" })}`, mustFail: true },
      { name: "own key: exp 1e308", header: `Bearer ${await with_({ exp: 1e308 })}`, mustFail: true },
      {
        name: "own key: iat in the future",
        header: `Bearer ${await with_({ iat: Math.floor(Date.now() / 1000) + 86400 })}`,
        mustFail: true,
      },
      {
        name: "own key: 5000 audiences",
        header: `Bearer ${await with_({ aud: Array(5000).fill("x") })}`,
        mustFail: true,
      },
      {
        name: "own key: caps not a list",
        header: `Bearer ${await with_({ caps: "CAP_IAM_GROUPS_LIST" })}`,
        mustFail: false,
      },
      {
        name: "own key: scopes with a NUL",
        header: `Bearer ${await with_({ scopes: [`${s.org.uid}\u0000`] })}`,
        mustFail: false,
      },
      {
        name: "own key: 100 KB of extra claims",
        header: `Bearer ${await with_({ pad: "p".repeat(100_000) })}`,
        mustFail: false,
      },
    );
  } catch (err) {
    console.log(`fuzz: tokens signed with the server's key skipped: ${(err as Error).message}`);
  }
  return list;
}

// ---------------------------------------------------------------------------------------------
// Wrong JSON types.

interface JsonSite {
  path: string[];
  field: DescField;
}

function jsonSites(desc: DescMessage, prefix: string[] = [], depth = 0): JsonSite[] {
  const out: JsonSite[] = [];
  for (const f of desc.fields) {
    out.push({ path: [...prefix, f.jsonName], field: f });
    if (f.fieldKind === "message" && !isWkt(f.message) && depth < 2)
      out.push(...jsonSites(f.message, [...prefix, f.jsonName], depth + 1));
  }
  return out;
}

const BIG = "9".repeat(40);

function wrongValues(f: DescField): JsonValue[] {
  const common: JsonValue[] = [{}, [], true, "\u0000"];
  if (f.fieldKind === "list") return ["x", 5, { a: 1 }, [[1]], [{}], [null], Array(2000).fill(1)];
  if (f.fieldKind === "map") return [[], "x", 5, { k: { x: 1 } }, { "": [] }];
  if (f.fieldKind === "enum") return ["NOT_A_VALUE", 1.5, 99999999999, "", -1, ...common];
  if (f.fieldKind === "message") {
    switch (f.message.typeName) {
      case "google.protobuf.Timestamp":
        return [
          "not-a-time",
          "2023-13-45T99:99:99Z",
          "0000-01-01T00:00:00Z",
          "10000-01-01T00:00:00Z",
          "1970-01-01T00:00:00.1234567890Z",
          5,
          {},
        ];
      case "google.protobuf.Duration":
        return ["1x", "-", "315576000001s", "1e9s", "s", 5, {}];
      case "google.protobuf.FieldMask":
        return [5, ["a"], "A.B_c", "a..b", "a,,b", "_", "x".repeat(10_000), {}];
      default:
        return ["str", 5, [], true, { "@type": "x" }];
    }
  }
  switch (f.scalar) {
    case ScalarType.STRING:
      return [123, 1e308, { a: 1 }, ["a"], true];
    case ScalarType.BOOL:
      return ["yes", 1, "true ", {}, "TRUE"];
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return ["abc", 1.5, BIG, `-${BIG}`, "1e3", "NaN", "0x10", " 1", 1e300, ...common];
    default:
      return ["abc", 1.5, BIG, 1e300, -1e300, "0x10", " 1", "1e2", 4294967296, -2147483649, ...common];
  }
}

function setJson(root: JsonObject, path: string[], value: JsonValue): JsonObject {
  let obj = root;
  path.forEach((k, i) => {
    if (i === path.length - 1) obj[k] = value;
    else {
      const next = obj[k];
      obj = (obj[k] = next && typeof next === "object" && !Array.isArray(next) ? next : {}) as JsonObject;
    }
  });
  return root;
}

// ---------------------------------------------------------------------------------------------
// The suites.

const GRPC_WEB = "application/grpc-web+proto";

function representative(rpcs: Rpc[]): Rpc[] {
  const names = [
    "GroupsService.GetGroup",
    "GroupsService.ListGroups",
    "GroupsService.CreateGroup",
    "GroupsService.UpdateGroup",
    "RoleBindingsService.BatchCreateRoleBindings",
    "SecurityTokenService.Exchange",
    "Auth.Register",
  ];
  return names.flatMap((n) => rpcs.filter((r) => r.name === n));
}

export const attackSuites: AttackSuite[] = [
  {
    title: "malformed protobuf bodies over gRPC, gRPC-Web and Connect (generated, every RPC)",
    share: 0.35,
    async run(ctx) {
      const numRuns = Math.max(30, Math.round((ctx.cases * 0.35) / 3));
      const failures: Failure[] = [];
      const caseArb = fc.nat(ctx.rpcs.length - 1).chain((i) =>
        fc.record({
          rpc: fc.constant(ctx.rpcs[i]!),
          payload: malformedProtoArb(ctx.rpcs[i]!.method.input, ctx.seeded.plausible),
        }),
      );
      type C = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;
      const op = ctx.headersFor("operator");
      const protocols: [string, (c: C) => Promise<Outcome>][] = [
        [
          "gRPC",
          (c) => rawGrpc(ctx.server.url, connectPath(c.rpc.service, c.rpc.method), envelope(c.payload.bytes), op),
        ],
        [
          "gRPC-Web",
          (c) => rawGrpcWeb(ctx.server.url, connectPath(c.rpc.service, c.rpc.method), envelope(c.payload.bytes), op),
        ],
        [
          "Connect binary",
          (c) =>
            sendConnect(
              ctx.server.url,
              connectPath(c.rpc.service, c.rpc.method),
              "application/proto",
              c.payload.bytes,
              op,
              "connect-proto",
            ),
        ],
      ];
      for (const [protocol, send] of protocols) {
        failures.push(
          ...(await fuzzTarget<C>(
            {
              name: `${protocol} (malformed protobuf)`,
              arb: caseArb,
              run: async (c) => check(await send(c), { domain: ERROR_DOMAIN, inputs: [] }),
              describe: (c) => `${c.rpc.name}: ${c.payload.label}: ${hex(c.payload.bytes)}`,
            },
            { seed: ctx.seed, numRuns, shrinkBudget: 40, maxShrunkClasses: 4 },
          )),
        );
      }
      return failures;
    },
  },

  {
    title: "malformed gRPC envelopes, compression and content types over gRPC, gRPC-Web and Connect",
    async run(ctx) {
      const op = ctx.headersFor("operator");
      const bomb = gzipSync(Buffer.alloc(64 * MiB));
      const valid = (rpc: Rpc) =>
        toBinary(
          rpc.method.input,
          create(rpc.method.input, baselineInit(rpc.method.input, ctx.seeded, ctx.server) as never),
        );
      type Env = { label: string; body: (v: Uint8Array) => Uint8Array; headers?: Record<string, string> };
      const envelopes: Env[] = [
        { label: "no body at all", body: () => new Uint8Array() },
        { label: "3 of the 5 prefix bytes", body: () => new Uint8Array([0, 0, 0]) },
        { label: "declared 100 bytes longer than sent", body: (v) => envelope(v, 0, v.length + 100) },
        {
          label: "declared shorter than sent",
          body: (v) => envelope(new Uint8Array([...v, 1, 2, 3, 4, 5, 6, 7, 8]), 0, Math.max(0, v.length - 1)),
        },
        { label: "declared 4 GiB", body: (v) => envelope(v, 0, 0xffffffff) },
        { label: "compressed flag without grpc-encoding", body: (v) => envelope(v, 1) },
        {
          label: "compressed flag, grpc-encoding gzip, not gzip",
          body: (v) => envelope(v, 1),
          headers: { "grpc-encoding": "gzip" },
        },
        { label: "grpc-encoding nobody knows", body: (v) => envelope(v, 1), headers: { "grpc-encoding": "zstd-fuzz" } },
        { label: "gzip bomb (64 MiB of zeros)", body: () => envelope(bomb, 1), headers: { "grpc-encoding": "gzip" } },
        { label: "trailer flag in a request", body: (v) => envelope(v, 0x80) },
        { label: "unknown flag bits", body: (v) => envelope(v, 0x7e) },
        { label: "two messages for a unary method", body: (v) => new Uint8Array([...envelope(v), ...envelope(v)]) },
        { label: "garbage after the message", body: (v) => new Uint8Array([...envelope(v), 0xff, 0xff]) },
        { label: "malformed payload in a good envelope", body: () => envelope(new Uint8Array([0x0f])) },
        { label: "grpc-timeout garbage", body: (v) => envelope(v), headers: { "grpc-timeout": "abcH" } },
        { label: "grpc-timeout of 0", body: (v) => envelope(v), headers: { "grpc-timeout": "0n" } },
        { label: "grpc-timeout too long", body: (v) => envelope(v), headers: { "grpc-timeout": "999999999H" } },
        {
          label: "grpc-accept-encoding garbage",
          body: (v) => envelope(v),
          headers: { "grpc-accept-encoding": "\u00ff,,," },
        },
      ];
      const rpcs = representative(ctx.rpcs);
      const cases = rpcs.flatMap((rpc) =>
        envelopes.flatMap((e) => [
          { rpc, e, protocol: "gRPC" as const },
          { rpc, e, protocol: "gRPC-Web" as const },
        ]),
      );
      const failures = await fixed(
        cases,
        (c) => `${c.protocol} ${c.rpc.name}`,
        async (c) => {
          const path = connectPath(c.rpc.service, c.rpc.method);
          const body = c.e.body(valid(c.rpc));
          const headers = { ...op, ...c.e.headers };
          const outcome =
            c.protocol === "gRPC"
              ? await rawGrpc(ctx.server.url, path, body, headers)
              : await rawGrpcWeb(ctx.server.url, path, body, headers);
          return { outcome, inputs: [] };
        },
        (c) => `${c.e.label} (${c.rpc.name})`,
      );

      // Connect unary: content types, encodings, GET forms.
      type CC = { label: string; rpc: Rpc; init: RequestInit & { headers: Record<string, string> }; query?: string };
      const connectCases: CC[] = rpcs.flatMap((rpc) => {
        const v = valid(rpc);
        const json = JSON.stringify(
          toJson(
            rpc.method.input,
            create(rpc.method.input, baselineInit(rpc.method.input, ctx.seeded, ctx.server) as never) as never,
          ),
        );
        const post = (label: string, headers: Record<string, string>, body: string | Uint8Array): CC => ({
          label,
          rpc,
          init: { method: "POST", headers: { ...op, ...headers }, body },
        });
        const connectGet = (label: string, query: string): CC => ({
          label,
          rpc,
          init: { method: "GET", headers: op },
          query,
        });
        return [
          post("content-type text/plain", { "content-type": "text/plain" }, json),
          post("no content-type", {}, json),
          post("streaming content type for a unary method", { "content-type": "application/connect+proto" }, v),
          post("application/json; charset=latin1", { "content-type": "application/json; charset=latin1" }, json),
          post("JSON content type, binary body", { "content-type": "application/json" }, v),
          post("proto content type, JSON body", { "content-type": "application/proto" }, json),
          post(
            "content-encoding gzip, not gzip",
            { "content-type": "application/proto", "content-encoding": "gzip" },
            v,
          ),
          post(
            "content-encoding nobody knows",
            { "content-type": "application/proto", "content-encoding": "zstd-fuzz" },
            v,
          ),
          post(
            "gzip bomb (64 MiB of zeros)",
            { "content-type": "application/proto", "content-encoding": "gzip" },
            bomb,
          ),
          post(
            "connect-protocol-version 2",
            { "content-type": "application/json", "connect-protocol-version": "2" },
            json,
          ),
          post("connect-timeout-ms garbage", { "content-type": "application/json", "connect-timeout-ms": "abc" }, json),
          post("connect-timeout-ms negative", { "content-type": "application/json", "connect-timeout-ms": "-1" }, json),
          post(
            "connect-timeout-ms huge",
            { "content-type": "application/json", "connect-timeout-ms": "99999999999999999999" },
            json,
          ),
          connectGet("GET with a malformed message", "?connect=v1&encoding=json&message=%7B%22"),
          connectGet("GET with bad base64", "?connect=v1&encoding=proto&base64=1&message=!!!"),
          connectGet("GET with an unknown encoding", "?connect=v1&encoding=xml&message=x"),
          connectGet("GET with compression nobody knows", "?connect=v1&encoding=json&compression=zstd&message=%7B%7D"),
          connectGet("GET without a message", "?connect=v1&encoding=json"),
          post("PUT instead of POST", { "content-type": "application/json" }, json),
        ].map((c) => (c.label === "PUT instead of POST" ? { ...c, init: { ...c.init, method: "PUT" } } : c));
      });
      failures.push(
        ...(await fixed(
          connectCases,
          (c) => `Connect ${c.rpc.name}`,
          async (c) => {
            try {
              const res = await fetch(ctx.server.url + connectPath(c.rpc.service, c.rpc.method) + (c.query ?? ""), {
                ...c.init,
                signal: AbortSignal.timeout(TIMEOUT_MS),
              });
              const text = Buffer.from(await res.arrayBuffer()).toString("utf8");
              return {
                outcome: readConnectAnswer("connect", res.status, res.headers.get("content-type") ?? "", text),
                inputs: [],
              };
            } catch (err) {
              return {
                outcome: {
                  protocol: "connect",
                  errorInfos: [],
                  texts: [],
                  problems: [{ kind: `transport failure (${(err as Error).name})`, detail: (err as Error).message }],
                },
                inputs: [],
              };
            }
          },
          (c) => `${c.label} (${c.init.method} ${connectPath(c.rpc.service, c.rpc.method)}${c.query ?? ""})`,
        )),
      );
      return failures;
    },
  },

  {
    title: "malformed JSON, wrong JSON types and unknown fields over REST and Connect",
    share: 0.2,
    async run(ctx) {
      const op = ctx.headersFor("operator");
      const failures: Failure[] = [];
      // Malformed JSON text, to representative RPCs (parsing is the same for all).
      const bodies: string[] = [
        "",
        "{",
        "}",
        '{"a":',
        "[1,2]",
        "null",
        '"str"',
        "123",
        "true",
        '{"name": "a"',
        "{'name': 'a'}",
        '{"name": NaN}',
        '{"name": 1e999999}',
        "{,}",
        "\u0000",
        "\ufeff{}",
        '{"name":"a"}\u0000',
        '{"name":"a"} {"name":"b"}',
        '{"name":"\\ud800"}',
        '{"name":"\\u0000"}',
        '{"name":"a","name":"b"}',
        '{"__proto__": {"fuzzPolluted": true}}',
        '{"constructor": {"prototype": {"fuzzPolluted": true}}}',
        "[".repeat(100_000),
        '{"a":'.repeat(50_000) + "1" + "}".repeat(50_000),
        JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))),
      ];
      const invalidUtf8 = Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
      const reps = representative(ctx.rpcs);
      type MJ = { rpc: Rpc; body: string | Buffer; protocol: "REST" | "Connect JSON" };
      const mj: MJ[] = reps.flatMap((rpc) =>
        [...bodies, invalidUtf8].flatMap((body) => [
          ...(rpc.rules.find((r) => r.body) ? [{ rpc, body, protocol: "REST" as const }] : []),
          { rpc, body, protocol: "Connect JSON" as const },
        ]),
      );
      failures.push(
        ...(await fixed(
          mj,
          (c) => `${c.protocol} ${c.rpc.name}`,
          async (c) => {
            const text = typeof c.body === "string" ? c.body : c.body.toString("latin1");
            if (c.protocol === "Connect JSON") {
              return {
                outcome: await sendConnect(
                  ctx.server.url,
                  connectPath(c.rpc.service, c.rpc.method),
                  "application/json",
                  c.body,
                  op,
                  "connect-json",
                ),
                inputs: [text],
              };
            }
            const rule = c.rpc.rules.find((r) => r.body)!;
            const { url } = restFromJson(c.rpc.method.input, { ...rule, body: "" }, baselineJson(ctx, c.rpc, rule));
            const res = await sendRestRaw(ctx.server.url, rule.verb, url, c.body, op);
            return { outcome: res, inputs: [text, url] };
          },
          (c) =>
            `${c.protocol === "REST" ? "REST body" : "Connect JSON"} ${clip(typeof c.body === "string" ? c.body : c.body.toString("latin1"), 120)}`,
        )),
      );
      const polluted = ({} as Record<string, unknown>).fuzzPolluted;
      if (polluted !== undefined) {
        failures.push({
          target: "process",
          kind: "Object.prototype polluted by a request body",
          detail: String(polluted),
          example: '{"__proto__": {"fuzzPolluted": true}}',
          seed: 0,
          path: "-",
          count: 1,
          shrunk: false,
        });
      }

      // Unknown fields, for every RPC.
      type UF = { rpc: Rpc; json: JsonObject; protocol: "REST" | "Connect JSON"; label: string };
      const uf: UF[] = ctx.rpcs.flatMap((rpc) => {
        const base = baselineJson(ctx, rpc);
        const firstMsg = rpc.method.input.fields.find((f) => f.fieldKind === "message" && !isWkt(f.message));
        const variants: [string, JsonObject][] = [
          ["unknown top-level field", { ...base, fuzzUnknownField: 1 }],
          ["@type at the top level", { ...base, "@type": "type.googleapis.com/x.Y" }],
        ];
        if (firstMsg) {
          variants.push([
            `unknown field inside ${firstMsg.name}`,
            { ...base, [firstMsg.jsonName]: { ...((base[firstMsg.jsonName] as JsonObject) ?? {}), fuzzUnknown: true } },
          ]);
        }
        return variants.flatMap(([label, json]) => [
          ...(rpc.rules.length ? [{ rpc, json, protocol: "REST" as const, label }] : []),
          { rpc, json, protocol: "Connect JSON" as const, label },
        ]);
      });
      failures.push(
        ...(await fixed(
          uf,
          (c) => `${c.protocol} ${c.rpc.name}`,
          async (c) => sendJson(ctx, c.protocol, c.rpc, c.json, op),
          (c) => `${c.label}: ${clip(JSON.stringify(c.json), 200)}`,
        )),
      );

      // Wrong types: generated, every RPC, every field (two levels deep).
      const numRuns = Math.max(30, Math.round((ctx.cases * 0.2) / 2));
      const wrongArb = fc.nat(ctx.rpcs.length - 1).chain((i) => {
        const rpc = ctx.rpcs[i]!;
        const sites = jsonSites(rpc.method.input);
        if (!sites.length) return fc.constant({ rpc, path: [] as string[], value: 1 as JsonValue });
        return fc.constantFrom(...sites).chain((site) =>
          fc.record({
            rpc: fc.constant(rpc),
            path: fc.constant(site.path),
            value: fc.constantFrom(...wrongValues(site.field)),
          }),
        );
      });
      type W = typeof wrongArb extends fc.Arbitrary<infer T> ? T : never;
      for (const protocol of ["REST", "Connect JSON"] as const) {
        failures.push(
          ...(await fuzzTarget<W>(
            {
              name: `${protocol} (wrong JSON types)`,
              arb: wrongArb,
              async run(c) {
                if (protocol === "REST" && !c.rpc.rules.length) return [];
                const json = c.path.length ? setJson(baselineJson(ctx, c.rpc), c.path, c.value) : {};
                const { outcome, inputs } = await sendJson(ctx, protocol, c.rpc, json, op);
                return check(outcome, { domain: ERROR_DOMAIN, inputs });
              },
              describe: (c) => `${c.rpc.name}: ${c.path.join(".")} = ${clip(JSON.stringify(c.value), 80)}`,
            },
            { seed: ctx.seed, numRuns, shrinkBudget: 30 },
          )),
        );
      }
      return failures;
    },
  },

  {
    title: "NUL in every string field of every request, over REST, Connect (JSON, binary) and gRPC",
    async run(ctx) {
      const op = ctx.headersFor("operator");
      type N = { rpc: Rpc; site: Step[]; protocol: Proto; value: string };
      const cases: N[] = ctx.rpcs.flatMap((rpc) =>
        stringSites(rpc.method.input).flatMap((site) =>
          ALL_PROTOCOLS.map((protocol) => ({ rpc, site, protocol, value: `fuzz\u0000${siteName(site)}` })),
        ),
      );
      return fixed(
        cases,
        (c) => `${c.protocol} ${c.rpc.name}`,
        async (c) => {
          const init = baselineInit(c.rpc.method.input, ctx.seeded, ctx.server);
          setSite(init, c.site, c.value);
          const msg = create(c.rpc.method.input, init as never) as Message;
          const { outcome, inputs } = await sendMessage(ctx, c.protocol, c.rpc, msg, op);
          return { outcome, inputs };
        },
        (c) => `${siteName(c.site)} = ${JSON.stringify(c.value)}`,
      );
    },
  },

  {
    title: "a 1 MiB uid over gRPC, Connect and REST",
    async run(ctx) {
      const op = ctx.headersFor("operator");
      const huge = `${ctx.seeded.org.uid}/${"0".repeat(MiB)}`;
      type U = { rpc: Rpc; site: Step[]; protocol: Proto };
      const cases: U[] = ctx.rpcs.flatMap((rpc) => {
        const site = stringSites(rpc.method.input).find(
          (s) => s.length === 1 && /(^|_)(uid|parent|id|identity|code)$|_of$/.test(s[0]!.f.name),
        );
        return site ? ALL_PROTOCOLS.map((protocol) => ({ rpc, site, protocol })) : [];
      });
      return fixed(
        cases,
        (c) => `${c.protocol} ${c.rpc.name}`,
        async (c) => {
          const init = baselineInit(c.rpc.method.input, ctx.seeded, ctx.server);
          setSite(init, c.site, huge);
          const { outcome, inputs } = await sendMessage(
            ctx,
            c.protocol,
            c.rpc,
            create(c.rpc.method.input, init as never) as Message,
            op,
          );
          return { outcome, inputs };
        },
        (c) => `${siteName(c.site)} = "${ctx.seeded.org.uid}/" + "0" × 1 MiB`,
      );
    },
  },

  {
    title: "oversized query strings (~100 KB), headers (~100 KB) and bodies (> 1 MiB)",
    async run(ctx) {
      const { server, seeded } = ctx;
      const op = ctx.headersFor("operator");
      const token = server.operatorToken;
      const G = "/iam/v2beta1/groups";
      const big = "q".repeat(100 * KB);
      const host = new URL(server.url).host;
      const getGroup = ctx.rpcs.find((r) => r.name === "GroupsService.GetGroup")!;
      const createGroup = ctx.rpcs.find((r) => r.name === "GroupsService.CreateGroup")!;
      const bigGroup = (n: number) =>
        create(createGroup.method.input, {
          parent: seeded.org.uid,
          group: { name: "big", description: "d".repeat(n) },
        } as never) as Message;
      type O = { label: string; send: () => Promise<Outcome> };
      const raw = (lines: string[], body = "") => lines.join("\r\n") + "\r\n\r\n" + body;
      const cases: O[] = [
        {
          label: "REST: GET groups?name=<100 KB>",
          send: () => sendRest(server.url, { method: "GET", url: `${G}?name=${big}` }, op),
        },
        {
          label: "REST: GET a group with a 100 KB junk parameter",
          send: () => sendRest(server.url, { method: "GET", url: `${G}/${seeded.org.uid}?x=${big}` }, op),
        },
        {
          label: "REST: GET /healthz?pad=<100 KB>",
          send: () => sendRest(server.url, { method: "GET", url: `/healthz?pad=${big}` }, {}),
        },
        {
          label: "REST: 20 000 query parameters",
          send: () =>
            sendRest(
              server.url,
              { method: "GET", url: `${G}?${Array.from({ length: 20_000 }, (_, i) => `p${i}=1`).join("&")}` },
              op,
            ),
        },
        {
          label: "REST: one header of 100 KB",
          send: () =>
            sendRest(server.url, { method: "GET", url: `${G}/${seeded.org.uid}` }, { ...op, "x-fuzz-pad": big }),
        },
        {
          label: "REST: Authorization of 100 KB",
          send: () =>
            sendRest(server.url, { method: "GET", url: `${G}/${seeded.org.uid}` }, { authorization: `Bearer ${big}` }),
        },
        {
          label: "raw HTTP/1.1: 2000 headers",
          send: () =>
            rawHttp1(
              server.url,
              raw([
                `GET ${G}/${seeded.org.uid} HTTP/1.1`,
                `Host: ${host}`,
                `Authorization: Bearer ${token}`,
                ...Array.from({ length: 2000 }, (_, i) => `X-Fuzz-${i}: ${"v".repeat(40)}`),
                "Connection: close",
              ]),
            ),
        },
        {
          label: "REST: body of 1.5 MiB",
          send: () =>
            sendRest(
              server.url,
              {
                method: "POST",
                url: `${G}/${seeded.org.uid}`,
                body: JSON.stringify({ name: "big", description: "d".repeat(1.5 * MiB) }),
              },
              op,
            ),
        },
        {
          label: "REST: body of 8 MiB",
          send: () =>
            sendRest(
              server.url,
              {
                method: "POST",
                url: `${G}/${seeded.org.uid}`,
                body: JSON.stringify({ name: "big", description: "d".repeat(8 * MiB) }),
              },
              op,
            ),
        },
        {
          label: "raw HTTP/1.1: chunked body of 2 MiB",
          send: () => {
            const chunk = "d".repeat(64 * 1024);
            const body = `{"name":"big","description":"` + chunk.repeat(32) + `"}`;
            const chunks: string[] = [];
            for (let i = 0; i < body.length; i += 65536) {
              const part = body.slice(i, i + 65536);
              chunks.push(`${part.length.toString(16)}\r\n${part}\r\n`);
            }
            return rawHttp1(
              server.url,
              raw(
                [
                  `POST ${G}/${seeded.org.uid} HTTP/1.1`,
                  `Host: ${host}`,
                  `Authorization: Bearer ${token}`,
                  "Content-Type: application/json",
                  "Transfer-Encoding: chunked",
                  "Connection: close",
                ],
                chunks.join("") + "0\r\n\r\n",
              ),
            );
          },
        },
        {
          label: "Connect JSON: body of 1.5 MiB",
          send: () =>
            sendConnect(
              server.url,
              connectPath(createGroup.service, createGroup.method),
              "application/json",
              JSON.stringify(toJson(createGroup.method.input, bigGroup(1.5 * MiB) as never)),
              op,
              "connect-json",
            ),
        },
        {
          label: "Connect binary: body of 1.5 MiB",
          send: () =>
            sendConnect(
              server.url,
              connectPath(createGroup.service, createGroup.method),
              "application/proto",
              toBinary(createGroup.method.input, bigGroup(1.5 * MiB) as never),
              op,
              "connect-proto",
            ),
        },
        {
          label: "gRPC: message of 1.5 MiB",
          send: () => ctx.grpc.call(createGroup.service, createGroup.method, bigGroup(1.5 * MiB), op),
        },
        {
          label: "gRPC: envelope declaring 1.5 MiB",
          send: () =>
            rawGrpc(
              server.url,
              connectPath(createGroup.service, createGroup.method),
              envelope(toBinary(createGroup.method.input, bigGroup(1.5 * MiB) as never)),
              op,
            ),
        },
        ...(["REST", "Connect binary", "gRPC-Web"] as const).map((kind) => ({
          label: `${kind}: 1.5 MiB body, then a second request on the same HTTP/1.1 connection`,
          send: async (): Promise<Outcome> => {
            const payload = toBinary(createGroup.method.input, bigGroup(1.5 * MiB) as never);
            const [path, type, body] =
              kind === "REST"
                ? [
                    `${G}/${seeded.org.uid}`,
                    "application/json",
                    Buffer.from(JSON.stringify({ name: "big", description: "d".repeat(1.5 * MiB) })),
                  ]
                : kind === "Connect binary"
                  ? [connectPath(createGroup.service, createGroup.method), "application/proto", Buffer.from(payload)]
                  : [connectPath(createGroup.service, createGroup.method), GRPC_WEB, Buffer.from(envelope(payload))];
            const first = Buffer.concat([
              Buffer.from(
                raw([
                  `POST ${path} HTTP/1.1`,
                  `Host: ${host}`,
                  `Authorization: Bearer ${token}`,
                  `Content-Type: ${type}`,
                  `Content-Length: ${body.length}`,
                ]),
              ),
              body,
            ]);
            const second = raw([`GET /healthz HTTP/1.1`, `Host: ${host}`]);
            const read = kind === "REST" ? restReader : kind === "Connect binary" ? connectReader : grpcWebReader;
            const [a, b] = await rawHttp1Sequence(server.url, [{ bytes: first, read }, { bytes: second }]);
            if (!a)
              return {
                protocol: "http1-raw",
                errorInfos: [],
                texts: [],
                problems: [{ kind: "no answer to the oversized request", detail: path }],
              };
            if (!b) return a;
            const later = b.problems.map((p) => ({
              kind: `the next request on the connection: ${p.kind}`,
              detail: p.detail,
            }));
            return { ...a, problems: [...a.problems, ...later] };
          },
        })),
        {
          label: "gRPC: a metadata entry of 100 KB",
          send: () =>
            ctx.grpc.call(
              getGroup.service,
              getGroup.method,
              create(getGroup.method.input, { uid: seeded.org.uid } as never) as Message,
              { ...op, "x-fuzz-pad": big },
            ),
        },
        {
          label: "raw HTTP/2: a header of 100 KB",
          send: () =>
            rawGrpc(server.url, connectPath(getGroup.service, getGroup.method), envelope(new Uint8Array()), {
              ...op,
              "x-fuzz-pad": big,
            }),
        },
        {
          label: "raw HTTP/2: 2000 headers",
          send: () =>
            rawGrpc(server.url, connectPath(getGroup.service, getGroup.method), envelope(new Uint8Array()), {
              ...op,
              ...Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`x-fuzz-${i}`, "v".repeat(40)])),
            }),
        },
      ];
      return fixed(
        cases,
        (c) => c.label,
        // The HTTP/2 cases send one header field over 64 KiB, or 2000 fields: beyond nghttp2.
        async (c) => ({
          outcome: await c.send(),
          inputs: [big],
          http2StackLimit: /metadata entry of 100 KB|raw HTTP\/2: (a header of 100 KB|2000 headers)/.test(c.label),
        }),
        (c) => c.label,
      );
    },
  },

  {
    title: "token attacks (alg none, HS256 with the public key, foreign keys, expired, wrong iss/aud, malformed)",
    async run(ctx) {
      const { server, seeded } = ctx;
      const creds = await badCredentials(server, seeded);
      const G = "/iam/v2beta1/groups";
      const host = new URL(server.url).host;
      const byName = (n: string) => ctx.rpcs.find((r) => r.name === n)!;
      const getGroup = byName("GroupsService.GetGroup");
      const listGroups = byName("GroupsService.ListGroups");
      const exchange = byName("SecurityTokenService.Exchange");
      const getMsg = create(getGroup.method.input, { uid: seeded.org.uid } as never) as Message;
      type T = { cred: BadCredential; target: string; send: (h: Record<string, string>) => Promise<Outcome> };
      const targets: Omit<T, "cred">[] = [
        {
          target: "REST GET group",
          send: (h) => sendRest(server.url, { method: "GET", url: `${G}/${seeded.org.uid}` }, h),
        },
        { target: "REST GET groups", send: (h) => sendRest(server.url, { method: "GET", url: `${G}?page_size=5` }, h) },
        {
          target: "REST POST group",
          send: (h) =>
            sendRest(server.url, { method: "POST", url: `${G}/${seeded.org.uid}`, body: '{"name":"forged"}' }, h),
        },
        { target: "REST GET /auth/v1/ok", send: (h) => sendRest(server.url, { method: "GET", url: "/auth/v1/ok" }, h) },
        {
          target: "REST POST /sts/exchange",
          send: (h) => sendRest(server.url, { method: "POST", url: "/sts/exchange" }, h),
        },
        {
          target: "Connect GetGroup",
          send: (h) =>
            sendConnect(
              server.url,
              connectPath(getGroup.service, getGroup.method),
              "application/json",
              JSON.stringify({ uid: seeded.org.uid }),
              h,
              "connect-json",
            ),
        },
        {
          target: "Connect Exchange",
          send: (h) =>
            sendConnect(
              server.url,
              connectPath(exchange.service, exchange.method),
              "application/json",
              "{}",
              h,
              "connect-json",
            ),
        },
        { target: "gRPC GetGroup", send: (h) => ctx.grpc.call(getGroup.service, getGroup.method, getMsg, h) },
        {
          target: "gRPC ListGroups",
          send: (h) =>
            ctx.grpc.call(listGroups.service, listGroups.method, create(listGroups.method.input) as Message, h),
        },
        {
          target: "gRPC Exchange",
          send: (h) => ctx.grpc.call(exchange.service, exchange.method, create(exchange.method.input) as Message, h),
        },
      ];
      const cases: T[] = creds.flatMap((cred) =>
        cred.rawOnly
          ? [
              {
                cred,
                target: "raw HTTP/1.1 GET group",
                send: () =>
                  rawHttp1(
                    server.url,
                    [
                      `GET ${G}/${seeded.org.uid} HTTP/1.1`,
                      `Host: ${host}`,
                      `Authorization: ${cred.header}`,
                      "Connection: close",
                      "",
                      "",
                    ].join("\r\n"),
                  ),
              },
            ]
          : targets.map((t) => ({ ...t, cred })),
      );
      return fixed(
        cases,
        (c) => c.target,
        async (c) => ({
          outcome: await c.send(c.cred.header === undefined ? {} : { authorization: c.cred.header }),
          inputs: c.cred.header ? [c.cred.header] : [],
          mustFail: c.cred.mustFail ? `a refused credential (${c.cred.name})` : undefined,
          // A token over 64 KiB is one header field nghttp2 refuses on HTTP/2 (gRPC targets).
          http2StackLimit: (c.cred.header?.length ?? 0) > 64 * 1024,
        }),
        (c) => `${c.cred.name}: Authorization: ${clip(c.cred.header ?? "(none)", 100)}`,
      );
    },
  },

  {
    title: "random paths, methods and raw HTTP/1.1 requests",
    share: 0.1,
    async run(ctx) {
      const { server, seeded } = ctx;
      const host = new URL(server.url).host;
      const segments = [
        "iam",
        "v2beta1",
        "groups",
        "roles",
        "identities",
        "roleBindings",
        "identityProviders",
        "accountAssociations",
        "groupInvites",
        "auth",
        "v1",
        "ok",
        "sts",
        "exchange",
        ".well-known",
        "jwks.json",
        "openid-configuration",
        "healthz",
        "chainguard.platform.iam.v2beta1.GroupsService",
        "GetGroup",
        seeded.org.uid,
        ":lookupGroup",
        "groups:checkEligibility",
        "..",
        ".",
        "%2e%2e",
        "%00",
        "%ff",
        "%",
        "%zz",
        "%2F",
        "",
        "*",
        "**",
        "~",
        "{uid}",
        "a:b",
        ";x=1",
        "é",
        "%C0%AF",
        "%ED%A0%80",
        "x".repeat(5000),
      ];
      const methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"];
      const contentTypes = [
        "",
        "application/json",
        "application/proto",
        "application/grpc",
        "application/grpc-web+proto",
        "application/connect+json",
        "application/x-www-form-urlencoded",
        "text/plain",
        "multipart/form-data; boundary=x",
      ];
      const arb = fc.record({
        method: fc.oneof(
          { arbitrary: fc.constantFrom(...methods), weight: 9 },
          { arbitrary: fc.constantFrom("FOO", "get", "TRACE", "PROPFIND"), weight: 1 },
        ),
        path: fc.array(
          fc.oneof(
            { arbitrary: fc.constantFrom(...segments), weight: 8 },
            { arbitrary: fc.string({ maxLength: 8 }), weight: 2 },
          ),
          { minLength: 0, maxLength: 6 },
        ),
        query: fc.option(
          fc.array(
            fc.tuple(
              fc.constantFrom("page_size", "uid", "name", "a.b", "uidp.descendants_of", "x", "%zz", ""),
              fc.constantFrom("1", "-1", "x", "%00", "%zz", "", seeded.org.uid),
            ),
            { maxLength: 4 },
          ),
          { nil: undefined },
        ),
        contentType: fc.constantFrom(...contentTypes),
        body: fc.option(fc.constantFrom("{}", '{"name":"x"}', "\u0000", "garbage", "[]"), { nil: undefined }),
        auth: fc.constantFrom("operator", "none", "none"),
        absolute: fc.oneof({ arbitrary: fc.constant(false), weight: 15 }, { arbitrary: fc.constant(true), weight: 1 }),
      });
      type R = typeof arb extends fc.Arbitrary<infer T> ? T : never;
      const requestOf = (c: R) => {
        const path = "/" + c.path.join("/") + (c.query ? "?" + c.query.map(([k, v]) => `${k}=${v}`).join("&") : "");
        const target = c.absolute ? `http://${host}${path}` : path;
        const lines = [`${c.method} ${target} HTTP/1.1`, `Host: ${host}`, "Connection: close"];
        if (c.auth === "operator") lines.push(`Authorization: Bearer ${server.operatorToken}`);
        if (c.contentType) lines.push(`Content-Type: ${c.contentType}`);
        const body = c.body ?? "";
        if (c.body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
        return { text: lines.join("\r\n") + "\r\n\r\n" + body, path };
      };
      const numRuns = Math.max(30, Math.round(ctx.cases * 0.1));
      const failures = await fuzzTarget<R>(
        {
          name: "HTTP/1.1 (random path)",
          arb,
          async run(c) {
            const { text, path } = requestOf(c);
            const o = await rawHttp1(server.url, text);
            // A HEAD answer has no body to judge; its status still must not be 5xx.
            if (c.method === "HEAD")
              o.problems = o.problems.filter((p) => !/body|content-type|message|code/.test(p.kind));
            if (c.method === "HEAD" && o.status && o.status >= 400) o.code = o.status === 404 ? 5 : 3;
            if (c.method === "HEAD") o.errorInfos = [{ reason: "HEAD", domain: ERROR_DOMAIN }];
            return check(o, { domain: ERROR_DOMAIN, inputs: [path, ...c.path] });
          },
          describe: (c) => clip(requestOf(c).text.replace(/Bearer [\w.-]+/, "Bearer <operator>"), 300),
        },
        { seed: ctx.seed, numRuns, shrinkBudget: 40 },
      );

      // Raw HTTP/1.1 oddities, fixed.
      const G = `/iam/v2beta1/groups/${seeded.org.uid}`;
      const auth = `Authorization: Bearer ${server.operatorToken}`;
      const rawCases: [string, string, { halfClose?: boolean; closeOk?: boolean }?][] = [
        ["request line without a version", `GET ${G}\r\n\r\n`],
        [
          "HTTP/0.9 style (incomplete: the client then half-closes)",
          `GET ${G}\r\n`,
          { halfClose: true, closeOk: true },
        ],
        ["HTTP/2.0 on an HTTP/1.1 connection", `GET ${G} HTTP/2.0\r\nHost: ${host}\r\n\r\n`],
        ["HTTP/1.0 without Host", `GET ${G} HTTP/1.0\r\n${auth}\r\n\r\n`],
        ["space in the path", `GET /iam/v2beta1/groups/a b HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`],
        ["raw UTF-8 in the path", `GET /iam/v2beta1/groups/é HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`],
        ["NUL in the path", `GET /iam/v2beta1/groups/a\u0000b HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`],
        ["header without a colon", `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nBroken header\r\nConnection: close\r\n\r\n`],
        ["header name with a space", `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nBad Name: x\r\nConnection: close\r\n\r\n`],
        ["NUL in a header value", `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nX-A: a\u0000b\r\nConnection: close\r\n\r\n`],
        ["obsolete line folding", `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nX-A: a\r\n b\r\nConnection: close\r\n\r\n`],
        ["bare LF line endings", `GET ${G} HTTP/1.1\nHost: ${host}\nConnection: close\n\n`],
        [
          "Content-Length and Transfer-Encoding both",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\n${auth}\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`,
        ],
        [
          "two Content-Length headers",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}`,
        ],
        [
          "negative Content-Length",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: -1\r\nConnection: close\r\n\r\n`,
        ],
        [
          "Content-Length not a number",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: abc\r\nConnection: close\r\n\r\n`,
        ],
        [
          "bad chunk size",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\n${auth}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
        ],
        [
          "unknown Transfer-Encoding",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: fuzz\r\nConnection: close\r\n\r\n`,
        ],
        [
          "Expect: 100-continue with a bad body",
          `POST ${G} HTTP/1.1\r\nHost: ${host}\r\n${auth}\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{{{`,
        ],
        ["Expect: something else", `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nExpect: fuzz\r\nConnection: close\r\n\r\n`],
        ["asterisk-form target", `OPTIONS * HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`],
        [
          "absolute-form to another host",
          `GET http://other.example${G} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        ],
        [
          "h2c upgrade request",
          `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`,
        ],
        [
          "websocket upgrade request",
          `GET ${G} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        ],
        [
          "an incomplete HTTP/2 preface (then half-closed)",
          "PRI * HTTP/2.0\r\n\r\nSM\r\n\r",
          { halfClose: true, closeOk: true },
        ],
        [
          "the client half-closes after a complete request (as HTTP/1.0 clients may)",
          `GET ${G} HTTP/1.1\r\nHost: ${host}\r\n${auth}\r\nConnection: close\r\n\r\n`,
          { halfClose: true },
        ],
      ];
      failures.push(
        ...(await fixed(
          rawCases,
          ([label]) => `raw HTTP/1.1: ${label}`,
          async ([, text, opts]) => {
            const outcome = await rawHttp1(server.url, text, opts);
            // An incomplete request may be dropped: there is nothing to answer yet.
            if (opts?.closeOk) outcome.problems = outcome.problems.filter((p) => !/connection closed/.test(p.kind));
            return { outcome, inputs: [] };
          },
          ([label]) => label,
        )),
      );
      return failures;
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Helpers for the JSON suites.

function baselineJson(ctx: AttackContext, rpc: Rpc, _rule?: HttpRule): JsonObject {
  const msg = create(rpc.method.input, baselineInit(rpc.method.input, ctx.seeded, ctx.server) as never);
  return toJson(rpc.method.input, msg as never) as JsonObject;
}

async function sendJson(
  ctx: AttackContext,
  protocol: "REST" | "Connect JSON",
  rpc: Rpc,
  json: JsonObject,
  headers: Record<string, string>,
): Promise<{ outcome: Outcome; inputs: string[] }> {
  const text = JSON.stringify(json);
  if (protocol === "Connect JSON") {
    return {
      outcome: await sendConnect(
        ctx.server.url,
        connectPath(rpc.service, rpc.method),
        "application/json",
        text,
        headers,
        "connect-json",
      ),
      inputs: [text],
    };
  }
  const req = restFromJson(rpc.method.input, rpc.rules[0]!, json);
  return { outcome: await sendRest(ctx.server.url, req, headers), inputs: [text, req.url, req.body ?? ""] };
}

function sendRestRaw(
  baseUrl: string,
  method: string,
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
): Promise<Outcome> {
  return sendRest(baseUrl, { method, url, body: typeof body === "string" ? body : new Uint8Array(body) }, headers);
}
