// The authorization matrix, GENERATED from what the server serves: every RPC of every service
// a registered feature module declares (server/modules.ts) that has a google.api.http rule,
// called over REST by every principal,
// the expected answer computed here from the method's `chainguard.annotations.iam` option and
// the reference's built-in capability sets (reference/api-surface.json), never from src/auth.
//
// Principals: no token, an expired token, a token for another audience, the operator, an
// identity of org B that owns org B, viewer / editor / owner of org A, owners of a sibling group
// and of a group below the scope (same org, no binding covering the scope), and per method a
// custom role with exactly its required capabilities and that role minus each one of them.
//
// Every scoped request points at an EXISTING resource of org A (made beforehand with the
// operator's token; Delete* get a fresh one per call), so any NOT_FOUND is the authorizer's.
// "Allowed" means the request reached the handler: anything but 401, 403, 404 (and 500); an
// RPC without a handler is authorized first and then answers UNIMPLEMENTED.
// Bodies are minimal ({}), so allowed writes fail validation or change nothing.
//
// Rules (iam enabled): unauthenticated → 401/16. Scoped: allowed iff the capabilities the
// principal's bindings grant at the scope include every listed one; otherwise 403/7 when some
// binding covers the scope, 404/5 when none does. Unscoped List*: 200 for everyone, items only
// where the principal holds the List capability (built-in roles wherever it holds
// CAP_IAM_ROLES_LIST). Unscoped without capabilities: allowed for every authenticated caller.
// Scoped methods whose handler requires more at the scope list it in HANDLER_ALSO_REQUIRES.
// Unscoped with capabilities (CreateGroup, GetRole) decide in the handler: HANDLER_SCOPES says
// on which field, and a new such RPC fails here until it is modelled. Methods without an iam
// option (public) or with `disabled` check credentials themselves (the token exchange): the
// matrix only checks that they answer (no INTERNAL); their own suites test them.
//
// The outbox, on the way: after each call of a method with an event (events/outbox.ts
// eventSpecOf), a 2xx answer recorded exactly one event of its type (with a subject, and its group
// for a resource in one) and any other answer none.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  getOption,
  hasOption,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { iam, iam_scope } from "../../src/gen/annotations/auth_pb.js";
import { Capability, CapabilitySchema, internal_only } from "../../src/gen/capabilities/capabilities_pb.js";
import { MODULES } from "../../src/server/modules.js";
import { eventSpecOf } from "../../src/events/outbox.js";
import {
  assertNotFound,
  assertPermissionDenied,
  assertRpcError,
  assertUnauthenticated,
} from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import {
  VIEWER_ROLE_UID,
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  createSubscription,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { cgaId, importAdvisory } from "../support/advisories.js";
import {
  BUILTIN_SETS,
  builtinCaps,
  covers,
  expiredToken,
  holdsAll,
  holdsAnywhere,
  isAncestorOrSelf,
  workload,
  wrongAudienceToken,
  type ModelBinding,
} from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { lastEventSeq } from "../support/events.js";
import { pushPlatformImage } from "../support/image-contents.js";
import { imagesRepositories } from "../../src/images/module.js";
import { OciClient } from "../support/oci.js";

// ---------------------------------------------------------------------------------------------
// The served RPCs and their rules, read from the descriptors.

/**
 * Every served service with its handlers, from a server running the registered modules (which
 * bind exactly the services they declare).
 */
const BINDINGS = await (async () => {
  const probe = await startTestServer("pglite");
  try {
    assert.deepEqual(
      probe.bindings.map((b) => b.service.typeName),
      MODULES.flatMap((m) => m.services.map((s) => s.typeName)),
    );
    return probe.bindings;
  } finally {
    await probe.close();
  }
})();

interface Rule {
  mode: "public" | "self-checked" | "enabled";
  /** capability names */
  caps: string[];
  unscoped: boolean;
  /** proto field names from the request to its iam_scope field, e.g. ["group", "uid"] */
  scopePath: string[];
}

function scopePathOf(desc: DescMessage, seen = new Set<string>()): string[] {
  if (seen.has(desc.typeName)) return [];
  const field = desc.fields.find((f) => hasOption(f, iam_scope) && getOption(f, iam_scope));
  if (!field) return [];
  if (field.fieldKind !== "message") return [field.name];
  const rest = scopePathOf(field.message, new Set([...seen, desc.typeName]));
  return rest.length ? [field.name, ...rest] : [];
}

function ruleOf(method: DescMethod): Rule {
  if (!hasOption(method, iam)) return { mode: "public", caps: [], unscoped: true, scopePath: [] };
  const option = getOption(method, iam);
  if (option.mode.case !== "enabled") return { mode: "self-checked", caps: [], unscoped: true, scopePath: [] };
  const r = option.mode.value;
  const extra = HANDLER_ALSO_REQUIRES[`${method.parent.name}.${method.name}`] ?? [];
  const caps = [...r.capabilities.map((c) => Capability[c]!), ...extra];
  return { mode: "enabled", caps, unscoped: r.unscoped, scopePath: r.unscoped ? [] : scopePathOf(method.input) };
}

/**
 * Scoped methods whose handler requires more capabilities at the same scope than the annotation
 * lists. Keyed "Service.Method". A subscription's creator must be able to see what it subscribes to.
 */
const HANDLER_ALSO_REQUIRES: Record<string, string[]> = {
  "SubscriptionsService.CreateSubscription": ["CAP_EVENTS_SUBSCRIPTION_LIST"],
  "SubscriptionFiltersService.CreateFilteredSubscription": ["CAP_EVENTS_SUBSCRIPTION_LIST"],
  "Subscriptions.Create": ["CAP_EVENTS_SUBSCRIPTION_LIST"],
};

/**
 * Unscoped methods with capabilities whose handler requires them on a request field itself
 * (reading access from the call context). Keyed "Service.Method".
 */
const HANDLER_SCOPES: Record<string, string> = {
  "GroupsService.CreateGroup": "parent",
  "Groups.Create": "parent",
  "RolesService.GetRole": "uid",
};

/**
 * Methods whose published proto marks no scope field although they act on one resource: the
 * server declares the field it authorizes on (core/service.ts declareScope). Keyed "Service.Method".
 */
const DECLARED_SCOPES: Record<string, string> = {
  "Vulnerabilities.CreateVulnReport": "repo_id",
};

/**
 * Unscoped List RPCs that answer only about one resource named in the request (a repo's
 * vulnerability reports): called with it; items are seen exactly by holders of the List
 * capability there.
 */
const LIST_QUERIES: Record<
  string,
  { query: (fx: Fixtures) => Record<string, string>; target: (fx: Fixtures) => string }
> = {
  "Vulnerabilities.ListVulnReports": { query: (fx) => ({ repo_id: fx.a.repo }), target: (fx) => fx.a.repo },
  "Vulnerabilities.ListVulnCountReports": {
    query: (fx) => ({ repo: fx.a.repo, tag: "latest" }),
    target: (fx) => fx.a.repo,
  },
  "Vulnerabilities.ListCumulativeVulnCountReports": {
    query: (fx) => ({ repo: fx.a.repo, tag: "latest" }),
    target: (fx) => fx.a.repo,
  },
};

/** Unscoped methods without capabilities whose handler answers NOT_FOUND about what the caller cannot list. */
const LOOKUPS: Record<
  string,
  { cap: string; query: (fx: Fixtures) => Record<string, string>; target: (fx: Fixtures) => string }
> = {
  "IdentitiesService.LookupIdentity": {
    cap: "CAP_IAM_IDENTITY_LIST",
    query: (fx) => ({ issuer: fx.identityIssuer, subject: fx.identitySubject }),
    target: (fx) => fx.a.identity,
  },
  "Identities.Lookup": {
    cap: "CAP_IAM_IDENTITY_LIST",
    query: (fx) => ({ issuer: fx.identityIssuer, subject: fx.identitySubject }),
    target: (fx) => fx.a.identity,
  },
  // an image's raw report: answered only from repos where the caller may list reports
  "Vulnerabilities.GetRawVulnReport": {
    cap: "CAP_VULN_REPORT_LIST",
    query: (fx) => ({ digest: fx.a.image, scanner: "GRYPE" }),
    target: (fx) => fx.a.repo,
  },
};

type Kind =
  | "group"
  | "role"
  | "identity"
  | "role_binding"
  | "identity_provider"
  | "account_association"
  | "group_invite"
  | "repo"
  | "tag"
  | "advisory"
  | "subscription"
  | "event"
  | "image";
const KINDS: readonly Kind[] = [
  "group",
  "role",
  "identity",
  "role_binding",
  "identity_provider",
  "account_association",
  "group_invite",
  "repo",
  "tag",
  "advisory",
  "subscription",
  "event",
  // an image digest in the repo fixture (made with it, see makeAll)
  "image",
];

/** Sub-resources and extension messages whose uid is their resource's (a repo's readme, visibility). */
const SAME_UID_AS: Record<string, Kind> = {
  repo_readme: "repo",
  repo_visibility: "repo",
  filtered_subscription: "subscription",
};

const snake = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
function singular(s: string): string {
  return s.endsWith("ies") ? s.slice(0, -3) + "y" : s.replace(/s$/, "");
}

/** The resource kind a path variable or scope field names, if it is one we have fixtures of. */
function kindOf(service: DescService, input: DescMessage, variable: string): Kind | undefined {
  const path = variable.split(".");
  let kind: string | undefined;
  if (path.length === 2 && path[1] === "uid") {
    const f = input.fields.find((x) => x.name === path[0]);
    kind = f?.fieldKind === "message" ? snake(f.message.name) : undefined;
    kind = SAME_UID_AS[kind ?? ""] ?? kind;
  } else if (path.length === 1) {
    // an image names its digest beside its repo (the repo fixture holds the image fixture)
    if (variable === "digest") return "image";
    if (variable === "repo_id" && service.name === "Vulnerabilities") return "repo";
    // A tag's parent is a repo; everything else lives in a group.
    if (variable === "parent") kind = service.name === "TagsService" ? "repo" : "group";
    // Extension RPCs name their resource in the request's name (GetRepoVisibility, DeprecateTag).
    else if (variable === "uid" && service.name === "RegistryExtensionsService")
      kind = /Tag/.test(input.name) ? "tag" : "repo";
    // The subscription filters extension's resource is the published subscription.
    else if (variable === "uid" && service.name === "SubscriptionFiltersService") kind = "subscription";
    else if (variable === "uid") kind = snake(singular(service.name.replace(/Service$/, "")));
    else if (variable.endsWith("_uid")) kind = variable.slice(0, -"_uid".length);
    // The v1 interface names uids `id`, `parent_id`, `<kind>_id` (and `group` for the group).
    else if (V1_KIND_OF_SERVICE[service.name]) kind = v1KindOf(service.name, input, variable);
  }
  return KINDS.includes(kind as Kind) ? (kind as Kind) : undefined;
}

/** v1 services (package chainguard.platform.iam / .registry) → the kind their `id` names */
const V1_KIND_OF_SERVICE: Record<string, Kind> = {
  Groups: "group",
  Identities: "identity",
  Roles: "role",
  RoleBindings: "role_binding",
  IdentityProviders: "identity_provider",
  GroupAccountAssociations: "account_association",
  GroupInvites: "group_invite",
  Registry: "repo",
  Subscriptions: "subscription",
};

function v1KindOf(service: string, input: DescMessage, variable: string): string | undefined {
  // The registry's one v1 service holds repos and tags: the request says which.
  const isTag = service === "Registry" && /Tag/.test(input.name);
  if (variable === "id") return isTag ? "tag" : V1_KIND_OF_SERVICE[service];
  // a tag's history is below the tag; everything else is created in a group
  if (variable === "parent_id") return input.name === "TagHistoryFilter" ? "tag" : "group";
  // an account association's uid is its group's
  if (variable === "group") return service === "GroupAccountAssociations" ? "account_association" : "group";
  if (variable.endsWith("_id")) return variable.slice(0, -"_id".length);
  return undefined;
}

/** The kind a List RPC lists. */
function listedKindOf(service: DescService, method: DescMethod): Kind | undefined {
  if (service.name === "AuditService") return "event";
  if (service.name === "Registry") return /Tag/.test(method.name) ? "tag" : "repo";
  return V1_KIND_OF_SERVICE[service.name] ?? kindOf(service, method.input, "uid");
}

/**
 * Filters a List RPC is called with, to keep the operator's answer on one page: every fixture
 * and principal made here records events; the event fixtures are groups' creations.
 */
const LIST_FILTERS: Record<string, string> = {
  "AuditService.ListEvents": "types=dev.chainguard.api.iam.group.created.v1",
};

/** List RPCs that answer no fixture by design: the registry keeps no end-of-life data. */
const ALWAYS_EMPTY_LISTS = new Set(["Registry.ListEolTags"]);

interface HttpRule {
  verb: string;
  template: string;
  body: string;
}

type Category =
  | { kind: "not-enabled" }
  | { kind: "list"; cap: string; itemsField: string }
  | { kind: "scoped"; field: string; caps: string[] }
  | { kind: "operator-only" }
  | { kind: "any-authenticated" }
  | { kind: "lookup"; cap: string };

interface Rpc {
  label: string;
  service: DescService;
  method: DescMethod;
  http: HttpRule;
  rule: Rule;
  hasHandler: boolean;
  category?: Category;
  /** why the RPC cannot be exercised, if it cannot */
  problem?: string;
  /** template variables → the kind of fixture they take */
  variables: { name: string; kind?: Kind }[];
}

function isListRpc(m: DescMethod): { itemsField: string } | undefined {
  if (!m.name.startsWith("List") || !hasOption(m, http) || getOption(m, http).pattern.case !== "get") return undefined;
  const repeated = m.output.fields.filter((f: DescField) => f.fieldKind === "list" && f.listKind === "message");
  return repeated.length === 1 ? { itemsField: repeated[0]!.jsonName } : undefined;
}

function classify(rpc: Rpc): { category?: Category; problem?: string } {
  const { rule, method } = rpc;
  if (rule.mode !== "enabled") return { category: { kind: "not-enabled" } };
  const list = isListRpc(method);
  if (rule.unscoped) {
    if (list) {
      if (rule.caps.length !== 1) return { problem: `List RPC with ${rule.caps.length} capabilities is not modelled` };
      return { category: { kind: "list", cap: rule.caps[0]!, itemsField: list.itemsField } };
    }
    const handlerScope = HANDLER_SCOPES[rpc.label];
    if (handlerScope) return { category: { kind: "scoped", field: handlerScope, caps: rule.caps } };
    const lookup = LOOKUPS[rpc.label];
    if (lookup) return { category: { kind: "lookup", cap: lookup.cap } };
    if (rule.caps.length === 0) return { category: { kind: "any-authenticated" } };
    return { problem: `unscoped ${rpc.label} requires ${rule.caps.join(", ")} but HANDLER_SCOPES does not say where` };
  }
  const declared = DECLARED_SCOPES[rpc.label];
  if (declared) return { category: { kind: "scoped", field: declared, caps: rule.caps } };
  if (rule.scopePath.length === 0)
    return { category: rule.caps.length ? { kind: "operator-only" } : { kind: "any-authenticated" } };
  return { category: { kind: "scoped", field: rule.scopePath.join("."), caps: rule.caps } };
}

function servedRpcs(): Rpc[] {
  const out: Rpc[] = [];
  for (const binding of BINDINGS) {
    for (const method of binding.service.methods) {
      if (method.methodKind !== "unary" || !hasOption(method, http)) continue;
      const rule = getOption(method, http);
      const { case: verb, value } = rule.pattern;
      const label = `${binding.service.name}.${method.name}`;
      const base = {
        label,
        service: binding.service,
        method,
        rule: ruleOf(method),
        hasHandler: !!binding.handlers[method.localName],
      };
      if (!verb || verb === "custom" || typeof value !== "string") {
        out.push({
          ...base,
          http: { verb: String(verb), template: "", body: "" },
          variables: [],
          problem: "custom or empty http pattern",
        });
        continue;
      }
      const names = [...value.matchAll(/\{([^}=]+)(?:=[^}]*)?\}/g)].map((m) => m[1]!);
      const rpc: Rpc = {
        ...base,
        http: { verb: verb.toUpperCase(), template: value, body: rule.body },
        variables: names.map((name) => ({ name, kind: kindOf(binding.service, method.input, name) })),
      };
      Object.assign(rpc, classify(rpc));
      const unresolved = rpc.variables.filter((v) => !v.kind).map((v) => v.name);
      // A method without a handler touches nothing, so any value exercises it.
      if (unresolved.length && rpc.hasHandler)
        rpc.problem ??= `no fixture for path variable(s) ${unresolved.join(", ")}`;
      if (rpc.category?.kind === "scoped") {
        const field = rpc.category.field;
        const inPath = names.includes(field);
        if (!inPath && !kindOf(binding.service, method.input, field))
          rpc.problem ??= `no fixture for scope field ${field}`;
        if (!inPath && rpc.http.body !== "*" && rpc.http.verb !== "GET")
          rpc.problem ??= `scope field ${field} is neither in the path nor the body`;
      }
      out.push(rpc);
    }
  }
  return out;
}

const RPCS = servedRpcs();

// ---------------------------------------------------------------------------------------------
// Fixtures: one of each kind in a group of org A (and of org B, for the lists), made by the
// operator; fresh ones on demand for Delete*.

type KindFixtures = Record<Kind, string>;

interface Fixtures {
  orgA: string;
  /** the group of org A every fixture lives in */
  a: KindFixtures;
  orgB: string;
  b: KindFixtures;
  identityIssuer: string;
  identitySubject: string;
}

/** the server's database, for the kinds written directly */
let database: TestServer["db"] | undefined;

let serial = 0;
const nextName = (what: string) => `${what} ${++serial}`;

async function makeKind(api: Api, group: string, kind: Kind, subject = `fixture-${++serial}`): Promise<string> {
  switch (kind) {
    case "group":
      return (await createGroup(api, group, nextName("group"))).uid;
    case "role":
      return (await createRole(api, group, nextName("role"), ["CAP_IAM_GROUPS_LIST"])).uid;
    case "identity":
      return (await createIdentity(api, group, nextName("identity"), subject)).uid;
    case "role_binding": {
      const identity = await createIdentity(api, group, nextName("bound"), `bound-${++serial}`);
      return (await createRoleBinding(api, group, identity.uid, VIEWER_ROLE_UID)).uid;
    }
    case "identity_provider":
      return (await createIdentityProvider(api, group, nextName("idp"))).uid;
    case "account_association": {
      const holder = await createGroup(api, group, nextName("acct"));
      return (await createAccountAssociation(api, holder.uid, nextName("assoc"))).uid;
    }
    case "group_invite":
      return (await createGroupInvite(api, group)).uid;
    case "repo": {
      const res = await api.post(`/registry/v2beta1/repos/${group}`, { name: `repo-${++serial}` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.uid;
    }
    case "tag": {
      const repo = await makeKind(api, group, "repo");
      const digest = `sha256:${createHash("sha256").update(`tag ${++serial}`).digest("hex")}`;
      const res = await api.post(`/registry/v2beta1/tags/${repo}`, { name: `t${serial}`, digest });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.uid;
    }
    case "advisory":
      return (await importAdvisory(api, group, cgaId(++serial), `package-${serial}`)).uid;
    case "subscription":
      return (await createSubscription(api, group, `https://receiver.example.com/${++serial}`)).uid;
    // made with its repo (makeAll): the image a repo-and-digest request names must be in that repo
    case "image":
      throw new Error("an image fixture is pushed into its repo fixture by makeAll");
    // the event of a group's creation
    case "event": {
      const made = await createGroup(api, group, nextName("evented"));
      const res = await api.get(`/bulwark/events/v1/events?subject=${made.uid}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.events[0].uid;
    }
  }
}

/** Pushes an image into a repo (by uid) and uploads a scanner's report of it; its digest. */
type ImagePusher = (repoUid: string) => Promise<string>;

async function makeAll(api: Api, group: string, subject: string, pushImage: ImagePusher): Promise<KindFixtures> {
  const out = {} as KindFixtures;
  for (const kind of KINDS)
    out[kind] =
      kind === "group"
        ? group
        : kind === "image"
          ? await pushImage(out.repo)
          : await makeKind(api, group, kind, subject);
  return out;
}

/**
 * The pusher of the matrix's server: a one-layer image over the registry protocol (one per
 * architecture: the two orgs' images differ), tagged `latest`, an uploaded Grype report of it
 * and one of ours (as the report worker writes them).
 */
function imagePusher(server: TestServer, api: Api, architecture: string): ImagePusher {
  return async (repoUid) => {
    const repo = await api.get(`/registry/v2beta1/repos/${repoUid}`);
    assert.equal(repo.status, 200, JSON.stringify(repo.body));
    const [org, ...groups] = repoUid.split("/").slice(0, -1);
    const name = [org, ...groups.map((g) => g.slice(-16)), repo.body.name].join("/");
    const token = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
    const oci = new OciClient(server.url, { credential: { username: "_token", password: token } });
    const { digest } = await pushPlatformImage(oci, name, { architecture });
    const tag = await api.post(`/registry/v2beta1/tags/${repoUid}`, { name: "latest", digest });
    assert.equal(tag.status, 200, JSON.stringify(tag.body));
    await imagesRepositories(server.db).reports.insert({
      repoUid,
      digest,
      scannerName: 0,
      scannerVersion: "bulwark matrix",
      origin: "bulwark",
      createdAt: new Date(),
      vulnerabilities: [{ id: "CVE-2024-0001", severity: "HIGH" }],
      findingsDigest: "matrix",
    });
    const report = await api.post(`/registry/v1/vuln_reports/${repoUid}`, {
      digest,
      scanner: { name: "GRYPE", version: "0.80.0" },
    });
    assert.equal(report.status, 200, JSON.stringify(report.body));
    return digest;
  };
}

// ---------------------------------------------------------------------------------------------
// Principals.

interface Principal {
  name: string;
  /** undefined: no Authorization header */
  token?: string;
  authenticated: boolean;
  operator?: boolean;
  bindings: ModelBinding[];
}

/** A capability no served method needs: what a "minus one" role of a one-capability method holds. */
const FILLER = "CAP_BUILD_REPORT_LIST";

/** Capabilities no role may hold (internal_only): a method needing one is the operator's. */
const INTERNAL = new Set(
  CapabilitySchema.values.filter((v) => getOption(v, internal_only)).map((v) => Capability[v.number]!),
);

const capKey = (caps: readonly string[]) => [...caps].sort().join(",");

/** Per method: the custom-role principals' capability sets (exact, and minus each one). */
function customSets(rpc: Rpc): { name: string; caps: string[] }[] {
  const c = rpc.category;
  const caps = c?.kind === "scoped" ? c.caps : c?.kind === "list" ? [c.cap] : c?.kind === "lookup" ? [c.cap] : [];
  if (caps.length === 0) return [];
  const sets = [{ name: `custom role: exactly ${caps.join(" + ")}`, caps }];
  for (const drop of caps) {
    const rest = caps.filter((x) => x !== drop);
    sets.push({
      name: `custom role: without ${drop}${rest.length ? "" : ` (holds only ${FILLER})`}`,
      caps: rest.length ? rest : [FILLER],
    });
  }
  // A role cannot hold internal capabilities: those sets are not made (the others still are).
  return sets.filter((set) => !set.caps.some((c) => INTERNAL.has(c)));
}

// ---------------------------------------------------------------------------------------------
// Requests.

interface Built {
  path: string;
  body?: unknown;
  /** the uid the request is about, for scoped expectations */
  scope?: string;
  /** for Delete*: the target, to check it survives a denial */
  target?: { kind: Kind; uid: string };
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{([^}=]+)(?:=[^}]*)?\}/g, (_, name: string) => values[name] ?? "unused");
}

function setPath(obj: Record<string, unknown>, path: string[], value: string): void {
  let o = obj;
  for (const p of path.slice(0, -1)) o = (o[p] ??= {}) as Record<string, unknown>;
  o[path[path.length - 1]!] = value;
}

async function buildRequest(rpc: Rpc, fx: Fixtures, fresh: (kind: Kind) => Promise<string>): Promise<Built> {
  const values: Record<string, string> = {};
  let target: Built["target"];
  const isDelete = rpc.method.name.startsWith("Delete");
  for (const v of rpc.variables) {
    if (!v.kind) continue;
    if (isDelete && v.name !== "parent") {
      const uid = await fresh(v.kind);
      values[v.name] = uid;
      target = { kind: v.kind, uid };
    } else {
      values[v.name] = fx.a[v.kind];
    }
  }
  let path = fill(rpc.http.template, values);
  // Minimal: `{}`, or `[]` when the body is a repeated field (v1's batch of role bindings).
  const bodyField = rpc.method.input.fields.find((f) => f.name === rpc.http.body);
  let body: Record<string, unknown> | unknown[] | undefined =
    rpc.http.body === "" ? undefined : bodyField?.fieldKind === "list" ? [] : {};
  let scope: string | undefined;
  const c = rpc.category;
  if (c?.kind === "scoped") {
    if (c.field in values) scope = values[c.field];
    else {
      const kind = kindOf(rpc.service, rpc.method.input, c.field)!;
      scope = fx.a[kind];
      const jsonPath = c.field.split(".").map((p) => p.replace(/_([a-z])/g, (_, ch: string) => ch.toUpperCase()));
      if (body && !Array.isArray(body)) setPath(body, jsonPath, scope);
      else path += `${path.includes("?") ? "&" : "?"}${encodeURIComponent(c.field)}=${encodeURIComponent(scope)}`;
    }
  }
  const lookup = LOOKUPS[rpc.label] ?? LIST_QUERIES[rpc.label];
  if (lookup) path += "?" + new URLSearchParams(lookup.query(fx)).toString();
  // v1 lists have no pages: they answer everything
  if (c?.kind === "list" && rpc.method.input.fields.some((f) => f.name === "page_size")) path += "?page_size=200";
  if (LIST_FILTERS[rpc.label]) path += `&${LIST_FILTERS[rpc.label]}`;
  return { path, body, scope, target };
}

/** "handler": the method has no iam rule the authorizer enforces (public, or it checks credentials itself). */
type Outcome = "allowed" | "handler" | 401 | 403 | 404;

function expected(rpc: Rpc, p: Principal, req: Built, fx: Fixtures): Outcome {
  const c = rpc.category!;
  if (c.kind === "not-enabled") return "handler";
  if (!p.authenticated) return 401;
  if (p.operator) return "allowed";
  switch (c.kind) {
    case "list":
    case "any-authenticated":
      return "allowed";
    case "operator-only":
      return 403;
    case "lookup":
      return holdsAll(p.bindings, LOOKUPS[rpc.label]!.target(fx), [c.cap]) ? "allowed" : 404;
    case "scoped": {
      const scope = req.scope ?? "";
      if (scope === "") return c.caps.length ? 403 : "allowed";
      if (holdsAll(p.bindings, scope, c.caps)) return "allowed";
      return covers(p.bindings, scope) ? 403 : 404;
    }
  }
}

function describeOutcome(res: JsonResponse): string {
  return `HTTP ${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}`;
}

// ---------------------------------------------------------------------------------------------

for (const backend of backends()) {
  describe(`authorization matrix [${backend}]`, () => {
    let server: TestServer;
    let op: Api;
    let fx: Fixtures;
    const fixed: Principal[] = [];
    /** custom-role principals by capability key */
    const custom = new Map<string, Principal>();
    let started = 0;

    async function freshKind(kind: Kind): Promise<string> {
      return makeKind(op, fx.a.group, kind);
    }

    before(async () => {
      started = Date.now();
      server = await startTestServer(backend);
      database = server.db;
      op = restClient(server.url, server.operatorToken);
      const orgA = (await createGroup(op, undefined, "org a")).uid as string;
      const orgB = (await createGroup(op, undefined, "org b")).uid as string;
      const groupA = (await createGroup(op, orgA, "scope a")).uid as string;
      const groupB = (await createGroup(op, orgB, "scope b")).uid as string;
      const subject = `fixture-subject-${Date.now()}`;
      fx = {
        orgA,
        orgB,
        a: await makeAll(op, groupA, subject, imagePusher(server, op, "amd64")),
        b: await makeAll(op, groupB, `${subject}-b`, imagePusher(server, op, "arm64")),
        identityIssuer: "https://issuer.example",
        identitySubject: subject,
      };
      const roles = (await op.get(`/iam/v2beta1/roles?uidp.in_root=true&page_size=200`)).body.roles as Json[];
      const builtin = (name: string) => {
        const r = roles.find((x) => x.name === name);
        assert.ok(r, `built-in role ${name} is not served`);
        return r;
      };
      const sibling = (await createGroup(op, orgA, "sibling")).uid as string;
      const below = (await createGroup(op, groupA, "below")).uid as string;

      const wl = (parent: string, name: string, grants: { at: string; role: Json }[]) =>
        workload(server, op, parent, name, grants);
      const principal = (name: string, w: { token: string; bindings: ModelBinding[] }): Principal => ({
        name,
        token: w.token,
        authenticated: true,
        bindings: w.bindings,
      });

      const viewer = await wl(orgA, "viewer", [{ at: orgA, role: builtin("viewer") }]);
      fixed.push(
        { name: "no token", authenticated: false, bindings: [] },
        { name: "expired token", token: await expiredToken(server, viewer.uid), authenticated: false, bindings: [] },
        {
          name: "token for another audience",
          token: await wrongAudienceToken(server, viewer.uid),
          authenticated: false,
          bindings: [],
        },
        { name: "operator", token: server.operatorToken, authenticated: true, operator: true, bindings: [] },
        principal(
          "owner of org B (an identity of org B)",
          await wl(orgB, "other org owner", [{ at: orgB, role: builtin("owner") }]),
        ),
        principal("viewer of org A", viewer),
        principal("editor of org A", await wl(orgA, "editor", [{ at: orgA, role: builtin("editor") }])),
        principal("owner of org A", await wl(orgA, "owner", [{ at: orgA, role: builtin("owner") }])),
        principal(
          "owner of a sibling group in org A",
          await wl(sibling, "sibling owner", [{ at: sibling, role: builtin("owner") }]),
        ),
        principal(
          "owner of a group below the scope",
          await wl(below, "below owner", [{ at: below, role: builtin("owner") }]),
        ),
      );
      for (const rpc of RPCS) {
        for (const set of customSets(rpc)) {
          const key = capKey(set.caps);
          if (custom.has(key)) continue;
          const role = await createRole(op, orgA, nextName("custom"), set.caps);
          custom.set(key, principal(set.name, await wl(orgA, nextName("custom holder"), [{ at: orgA, role }])));
        }
      }
      const byCategory = new Map<string, number>();
      for (const r of RPCS) {
        const k = `${r.category?.kind ?? "unclassified"}${r.hasHandler ? "" : " (no handler)"}`;
        byCategory.set(k, (byCategory.get(k) ?? 0) + 1);
      }
      console.log(
        `[${backend}] matrix setup: ${RPCS.length} RPCs (${[...byCategory].map(([k, n]) => `${n} ${k}`).join(", ")}), ` +
          `${fixed.length} fixed + ${custom.size} custom principals in ${Date.now() - started} ms`,
      );
    });
    after(async () => {
      console.log(`[${backend}] authorization matrix: ${Date.now() - started} ms`);
      await server?.close();
    });

    function principalsFor(rpc: Rpc, authenticated: boolean): Principal[] {
      const customs = customSets(rpc).map((s) => ({ ...custom.get(capKey(s.caps))!, name: s.name }));
      return [...fixed, ...customs].filter((p) => p.authenticated === authenticated);
    }

    it("every served RPC with an HTTP rule can be exercised (a new RPC needs a fixture kind or a rule here)", () => {
      assert.ok(RPCS.length >= 40, `only ${RPCS.length} RPCs found`);
      const problems = RPCS.filter((r) => r.problem || !r.category).map(
        (r) => `${r.label}: ${r.problem ?? "unclassified"}`,
      );
      assert.deepEqual(problems, []);
      for (const label of [...Object.keys(HANDLER_SCOPES), ...Object.keys(LOOKUPS)]) {
        assert.ok(
          RPCS.some((r) => r.label === label),
          `${label} is modelled here but not served`,
        );
      }
    });

    it("the built-in roles the model uses are exactly the reference's capability sets", async () => {
      const roles = (await op.get(`/iam/v2beta1/roles?uidp.in_root=true&page_size=200`)).body.roles as Json[];
      for (const name of Object.keys(BUILTIN_SETS)) {
        const served = roles.find((r) => r.name === name);
        assert.ok(served, name);
        assert.deepEqual(new Set(served.capabilities), builtinCaps(name), name);
      }
    });

    /** Calls the RPC as `p` and checks the answer; returns a description on mismatch. */
    async function check(rpc: Rpc, p: Principal): Promise<string | undefined> {
      const req = await buildRequest(rpc, fx, freshKind);
      const want = expected(rpc, p, req, fx);
      const api = restClient(server.url, p.token);
      const event = eventSpecOf(rpc.method);
      const seqBefore = event ? await lastEventSeq(server) : "0";
      const res = await api.call(rpc.http.verb, req.path, req.body);
      const where = `${rpc.label} as ${p.name} (${rpc.http.verb} ${req.path})`;
      try {
        if (event) await checkEvent(event.type, seqBefore, res, where, rpc.label);
        if (want === 401) assertUnauthenticated(res, where);
        else if (want === 403) assertPermissionDenied(res, where);
        else if (want === 404) assertNotFound(res, where);
        else if (want === "handler") {
          assert.notEqual(res.status, 500, `${where}: ${describeOutcome(res)}`);
          if (res.status >= 400)
            assert.equal(typeof res.body?.code, "number", `${where}: not an AIP-193 error: ${describeOutcome(res)}`);
        } else {
          assert.ok(
            ![401, 403, 404].includes(res.status) && res.status !== 500,
            `${where}: expected to reach the handler, got ${describeOutcome(res)}`,
          );
          // (a List RPC without a handler is authorized, then answers UNIMPLEMENTED)
          if (rpc.category?.kind === "list" && rpc.hasHandler) checkList(rpc, p, res, where);
        }
        if (req.target && want !== "allowed") {
          // A refused Delete leaves its target in place.
          const still = await getAsOperator(rpc.service, req.target.uid);
          if (still)
            assert.equal(
              still.status,
              200,
              `${where}: the target is gone after a refused delete: ${describeOutcome(still)}`,
            );
        }
        if (req.target && want === "allowed" && rpc.hasHandler) {
          assert.equal(res.status, 200, `${where}: ${describeOutcome(res)}`);
          const gone = await getAsOperator(rpc.service, req.target.uid);
          if (gone) assert.equal(gone.status, 404, `${where}: the target survived its delete`);
        }
      } catch (err) {
        return (err as Error).message;
      }
      return undefined;
    }

    /** Evented methods seen answering 2xx, with the one event each recorded. */
    const eventedSuccesses = new Set<string>();

    /**
     * The outbox: an answered call of an evented method recorded exactly one event of its type (a
     * subject, and the group for a resource in one); a refused or failed call recorded none.
     */
    async function checkEvent(type: string, seqBefore: string, res: JsonResponse, where: string, label: string) {
      const rows = await server.db
        .selectFrom("events")
        .select(["subject", "parent_uid"])
        .where("type", "=", type)
        .where("seq", ">", seqBefore as never)
        .execute();
      if (res.status < 200 || res.status > 299) {
        assert.equal(rows.length, 0, `${where}: answered ${res.status} but recorded ${type}`);
        return;
      }
      assert.equal(rows.length, 1, `${where}: answered ${res.status}; ${type} recorded ${rows.length} times`);
      const { subject, parent_uid: group } = rows[0]!;
      assert.ok(subject, `${where}: ${type} without a subject`);
      if (subject.includes("/") || /\.iam\.group\./.test(type)) {
        assert.ok(group, `${where}: ${type} of ${subject} without its group`);
        assert.ok(isAncestorOrSelf(group, subject), `${where}: ${type} of ${subject} in group ${group}`);
      }
      eventedSuccesses.add(label);
    }

    async function getAsOperator(service: DescService, uid: string): Promise<JsonResponse | undefined> {
      const get = service.methods.find(
        (m) => m.name.startsWith("Get") && hasOption(m, http) && getOption(m, http).pattern.case === "get",
      );
      const template = get && (getOption(get, http).pattern.value as string);
      if (!template || !/\{uid=/.test(template)) return undefined;
      return op.get(fill(template, { uid }));
    }

    function checkList(rpc: Rpc, p: Principal, res: JsonResponse, where: string): void {
      const c = rpc.category as Extract<Category, { kind: "list" }>;
      assert.equal(res.status, 200, `${where}: ${describeOutcome(res)}`);
      const items = res.body[c.itemsField] as Json[];
      assert.ok(Array.isArray(items), `${where}: no ${c.itemsField}`);
      assert.ok(!res.body.nextPageToken, `${where}: more than one page; raise page_size`);
      const about = LIST_QUERIES[rpc.label];
      if (about) {
        // items about the one resource asked for: all of them to a holder of the capability there, none to others
        const sees = p.operator || holdsAll(p.bindings, about.target(fx), [c.cap]);
        assert.equal(items.length > 0, sees, `${where}: ${items.length} items`);
        return;
      }
      if (rpc.method.output.fields.some((f) => f.name === "total_count"))
        assert.equal(
          res.body.totalCount,
          String(items.length),
          `${where}: totalCount counts what the caller cannot see`,
        );
      // v2 items carry `uid`, v1 items `id` (an account association its group's)
      for (const item of items) item.uid ??= item.id ?? item.group;
      const listsRoles = rpc.service.name === "RolesService" || rpc.service.name === "Roles";
      const visible = (uid: string) =>
        p.operator ||
        (!uid.includes("/") && listsRoles
          ? holdsAnywhere(p.bindings, ["CAP_IAM_ROLES_LIST"])
          : holdsAll(p.bindings, uid, [c.cap]));
      for (const item of items)
        assert.ok(
          visible(item.uid),
          `${where}: ${item.uid} (${item.name ?? ""}) is listed to a caller without ${c.cap} there`,
        );
      const kind = listedKindOf(rpc.service, rpc.method);
      assert.ok(kind, `${where}: no fixture kind for ${rpc.service.name}`);
      if (ALWAYS_EMPTY_LISTS.has(rpc.label)) {
        assert.deepEqual(items, [], where);
        return;
      }
      const uids = new Set(items.map((x) => x.uid as string));
      for (const [org, uid] of [
        [fx.orgA, fx.a[kind]],
        [fx.orgB, fx.b[kind]],
      ] as const) {
        assert.equal(
          uids.has(uid),
          visible(uid),
          `${where}: the ${kind} fixture of ${org === fx.orgA ? "org A" : "org B"} is ${uids.has(uid) ? "listed" : "missing"}`,
        );
      }
      if (!p.operator) {
        const roots = new Set(p.bindings.map((b) => b.at.split("/")[0]));
        for (const item of items) {
          if (item.uid.includes("/") || !listsRoles)
            assert.ok(
              roots.has(item.uid.split("/")[0]),
              `${where}: ${item.uid} is from a tree the caller has no binding in`,
            );
        }
      }
      if (rpc.label === "RolesService.ListRoles") {
        const builtins = items.filter((x) => !x.uid.includes("/")).length;
        assert.equal(
          builtins,
          visible(VIEWER_ROLE_UID) ? Object.keys(BUILTIN_SETS).length : 0,
          `${where}: built-in roles`,
        );
      }
    }

    for (const rpc of RPCS) {
      const title = `${rpc.label} (${rpc.http.verb} ${rpc.http.template})`;
      describe(title, () => {
        const ready = () =>
          assert.ok(rpc.category && !rpc.problem, `${rpc.label} cannot be exercised: ${rpc.problem ?? "unclassified"}`);

        it(
          rpc.rule.mode === "enabled"
            ? "no token, an expired token, another audience: 401 UNAUTHENTICATED"
            : "not iam-enabled: the handler decides (no INTERNAL)",
          async () => {
            ready();
            const failures: string[] = [];
            for (const p of principalsFor(rpc, false)) {
              const f = await check(rpc, p);
              if (f) failures.push(f);
            }
            assert.deepEqual(failures, []);
          },
        );

        it("authenticated principals: allowed exactly when their capabilities at the scope include all required", async () => {
          ready();
          const failures: string[] = [];
          for (const p of principalsFor(rpc, true)) {
            const f = await check(rpc, p);
            if (f) failures.push(f);
          }
          assert.deepEqual(failures, []);
        });
      });
    }

    it("the evented methods checked answering (exactly one event each) include every evented Delete", () => {
      const evented = RPCS.filter((r) => r.hasHandler && eventSpecOf(r.method));
      const deletes = evented.filter((r) => r.method.name.startsWith("Delete")).map((r) => r.label);
      assert.ok(deletes.length > 0);
      assert.deepEqual(
        deletes.filter((label) => !eventedSuccesses.has(label)),
        [],
      );
      console.log(
        `[${backend}] outbox: ${eventedSuccesses.size} of ${evented.length} evented RPCs answered here with exactly one event; ` +
          `every refused or failed call of all ${evented.length} recorded none`,
      );
    });

    it("an authorizer NOT_FOUND does not reveal existence: an existing uid of org A answers like a missing one", async () => {
      const outsider = fixed.find((p) => p.name.startsWith("owner of org B"))!;
      const api = restClient(server.url, outsider.token);
      for (const rpc of RPCS.filter(
        (r) => r.category?.kind === "scoped" && r.method.name.startsWith("Get") && r.hasHandler,
      )) {
        const kind = rpc.variables[0]?.kind;
        if (!kind) continue;
        const existing = fx.a[kind];
        const missing = `${fx.a.group}/${"0".repeat(16)}`;
        const a = await api.get(fill(rpc.http.template, { [rpc.variables[0]!.name]: existing }));
        const b = await api.get(fill(rpc.http.template, { [rpc.variables[0]!.name]: missing }));
        assertRpcError(a, 404, 5, `${rpc.label} existing`);
        assertRpcError(b, 404, 5, `${rpc.label} missing`);
        const strip = (body: Json) => JSON.stringify(body).split(missing).join("<uid>").split(existing).join("<uid>");
        assert.equal(strip(a.body), strip(b.body), rpc.label);
      }
    });
  });
}
