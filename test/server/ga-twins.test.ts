// The GA packages (chainguard.platform.*.v2) answer exactly as their v2beta1 twins. Generated from
// the descriptors: every unary method of every served v2beta1 service is called on both packages,
// over REST (its HTTP rule) and over Connect (JSON), with the same request: reads on real
// resources, writes with requests that change nothing (empty, or on a uid that does not exist),
// and the answers (status, body, error details) must be equal once "v2beta1" reads "v2". Then a
// round trip shows one set of data behind both: written through one package, read through the other.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { http as httpRule } from "../../src/gen/google/api/annotations_pb.js";
import { MODULES } from "../../src/server/modules.js";
import { cgaId, importAdvisory } from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  type Json,
} from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ORG = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
/** a well-formed uid under the org that names nothing */
const ABSENT = `${ORG}/00000000deadbeef`;

const SERVED = MODULES.flatMap((m) => m.services);
const BETA = SERVED.filter((s) => s.typeName.includes(".v2beta1."));
const gaOf = (s: DescService) => SERVED.find((t) => t.typeName === s.typeName.replace(".v2beta1.", ".v2."));

interface Rule {
  verb: string;
  path: string;
  body: string;
}

function ruleOf(method: DescMethod): Rule {
  const rule = getOption(method, httpRule);
  const pattern = rule.pattern;
  assert.ok(pattern.case && pattern.case !== "custom", `${method.parent.typeName}.${method.name} has no HTTP rule`);
  return { verb: pattern.case.toUpperCase(), path: pattern.value as string, body: rule.body };
}

const camel = (s: string) => s.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

function getPath(obj: Json, dotted: string): unknown {
  return dotted.split(".").reduce<unknown>((o, k) => (o as Json | undefined)?.[camel(k)], obj);
}

function withoutPath(obj: Json, dotted: string): Json {
  const [head, ...rest] = dotted.split(".");
  const key = camel(head!);
  if (!(key in obj)) return obj;
  if (rest.length === 0) {
    const { [key]: _gone, ...others } = obj;
    return others;
  }
  return { ...obj, [key]: withoutPath(obj[key] as Json, rest.join(".")) };
}

function flatten(obj: Json, prefix = ""): [string, string][] {
  return Object.entries(obj).flatMap(([k, v]) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? flatten(v as Json, `${prefix}${k}.`)
      : Array.isArray(v)
        ? v.map((x) => [`${prefix}${k}`, String(x)] as [string, string])
        : [[`${prefix}${k}`, String(v)] as [string, string]],
  );
}

/** The REST request of a method's HTTP rule for a request in proto JSON. */
function restRequest(rule: Rule, request: Json): { verb: string; path: string; body?: Json } {
  let rest = request;
  const path = rule.path.replace(/\{([a-z_.]+)(=[^}]*)?\}/g, (_m, field: string) => {
    const value = getPath(request, field);
    rest = withoutPath(rest, field);
    return String(value ?? "");
  });
  if (rule.body === "*") return { verb: rule.verb, path, body: rest };
  if (rule.body !== "") return { verb: rule.verb, path, body: (getPath(rest, rule.body) as Json) ?? {} };
  const query = new URLSearchParams(flatten(rest)).toString();
  return { verb: rule.verb, path: query ? `${path}?${query}` : path };
}

/** Both packages' answers, comparable: the package's own name reads the same. */
const normalized = (value: unknown) =>
  JSON.parse(
    JSON.stringify(value ?? null)
      .replaceAll(".v2beta1.", ".v2.")
      .replaceAll("/v2beta1/", "/v2/"),
  );

for (const backend of backends()) {
  describe(`GA twins (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    /** a real resource per service, for reads */
    const seeded: Record<string, string> = {};

    before(async () => {
      server = await startTestServer(backend, { rootGroups: [{ uid: ORG, name: "twins" }] });
      api = restClient(server.url, server.operatorToken);
      const group = await createGroup(api, ORG, "team");
      const role = await createRole(api, ORG, "reader");
      const identity = await createIdentity(api, ORG, "robot", "robot-subject");
      const binding = await createRoleBinding(api, group.uid, identity.uid, role.uid);
      const idp = await createIdentityProvider(api, ORG, "sso");
      const association = await createAccountAssociation(api, group.uid, "aws");
      const invite = await createGroupInvite(api, ORG);
      const repo = await api.post(`/registry/v2beta1/repos/${ORG}`, { name: "app" });
      assert.equal(repo.status, 200, JSON.stringify(repo.body));
      const tag = await api.post(`/registry/v2beta1/tags/${repo.body.uid}`, {
        name: "latest",
        digest: `sha256:${"ab".repeat(32)}`,
      });
      assert.equal(tag.status, 200, JSON.stringify(tag.body));
      const advisory = await importAdvisory(api, ORG, cgaId(7), "twin-package");
      Object.assign(seeded, {
        GroupsService: group.uid,
        RolesService: role.uid,
        IdentitiesService: identity.uid,
        RoleBindingsService: binding.uid,
        IdentityProvidersService: idp.uid,
        AccountAssociationsService: association.uid,
        GroupInvitesService: invite.uid,
        ReposService: repo.body.uid,
        TagsService: tag.body.uid,
        AdvisoriesService: advisory.uid,
      });
    });
    after(() => server?.close());

    /** A request for the method: a real uid for reads, nothing that changes state for writes. */
    function requestFor(method: DescMethod, rule: Rule): Json {
      const read = rule.verb === "GET";
      const request: Json = {};
      for (const field of method.input.fields) {
        const name = field.jsonName;
        if (field.name === "uid") request[name] = read ? (seeded[method.parent.name] ?? ABSENT) : ABSENT;
        else if (field.name === "parent") request[name] = read ? ORG : ABSENT;
        else if (field.name === "uidp") request[name] = { descendantsOf: ORG };
        else if (field.name.endsWith("_uid") && field.fieldKind === "scalar") request[name] = ABSENT;
        else if (field.fieldKind === "message" && rule.path.includes(`{${field.name}.uid`))
          request[name] = { uid: ABSENT };
      }
      return request;
    }

    test("every served v2beta1 service has a served GA twin with the same methods", () => {
      assert.ok(BETA.length >= 10, `only ${BETA.length} v2beta1 services served`);
      for (const beta of BETA) {
        const ga = gaOf(beta);
        assert.ok(ga, `${beta.typeName} has no served GA twin`);
        assert.deepEqual(
          ga.methods.map((m) => [m.name, ruleOf(m).verb, ruleOf(m).path]),
          beta.methods.map((m) => [m.name, ruleOf(m).verb, ruleOf(m).path.replace("/v2beta1/", "/v2/")]),
        );
      }
    });

    for (const beta of BETA) {
      for (const method of beta.methods) {
        test(`${beta.name}.${method.name}: same answer on v2 over REST and Connect`, async () => {
          const ga = gaOf(beta)!;
          const twin = ga.methods.find((m) => m.name === method.name)!;
          const request = requestFor(method, ruleOf(method));
          const answers = [];
          for (const [service, m] of [
            [beta, method],
            [ga, twin],
          ] as const) {
            const rest = restRequest(ruleOf(m), request);
            const viaRest = await api.call(rest.verb, rest.path, rest.body);
            const viaConnect = await api.call("POST", `/${service.typeName}/${m.name}`, request, {
              "connect-protocol-version": "1",
            });
            answers.push({ rest: [viaRest.status, viaRest.body], connect: [viaConnect.status, viaConnect.body] });
          }
          assert.ok(answers[0]!.rest[0] !== 404 || typeof answers[0]!.rest[1] === "object", "v2beta1 route missing");
          assert.deepEqual(normalized(answers[1]), normalized(answers[0]));
          if (
            ruleOf(method).verb === "GET" &&
            seeded[beta.name] &&
            !method.name.startsWith("Lookup") &&
            !method.name.startsWith("Check")
          )
            assert.equal(answers[0]!.rest[0], 200, `${method.name}: ${JSON.stringify(answers[0]!.rest[1])}`);
        });
      }
    }

    test("one set of data: written through v2, read through v2beta1 and back", async () => {
      const created = await api.post(`/iam/v2/groups/${ORG}`, { name: "ga-made", description: "via v2" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const viaBeta = await api.get(`/iam/v2beta1/groups/${created.body.uid}`);
      assert.deepEqual(viaBeta.body, created.body);
      const updated = await api.patch(`/iam/v2beta1/groups/${created.body.uid}?updateMask=description`, {
        description: "via v2beta1",
      });
      assert.equal(updated.status, 200, JSON.stringify(updated.body));
      const viaGa = await api.get(`/iam/v2/groups/${created.body.uid}`);
      assert.deepEqual(viaGa.body, updated.body);
      const listed = await api.get(`/iam/v2/groups?uidp.childrenOf=${ORG}&pageSize=100`);
      assert.ok(listed.body.groups.some((g: Json) => g.uid === created.body.uid && g.description === "via v2beta1"));
      assert.equal((await api.delete(`/iam/v2/groups/${created.body.uid}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/groups/${created.body.uid}`)).status, 404);

      const repo = await api.post(`/registry/v2/repos/${ORG}`, { name: "ga-repo" });
      assert.equal(repo.status, 200, JSON.stringify(repo.body));
      assert.deepEqual((await api.get(`/registry/v2beta1/repos/${repo.body.uid}`)).body, repo.body);
      const advisories = await api.get(`/vulnerabilities/v2/advisories?uidp.childrenOf=${ORG}`);
      assert.equal(advisories.status, 200, JSON.stringify(advisories.body));
      assert.deepEqual(
        advisories.body.advisories.map((a: Json) => a.advisoryId),
        [cgaId(7)],
      );
    });
  });
}
