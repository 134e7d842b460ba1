// `bulwark iam identities | roles | role-bindings` as a user runs them (in-process,
// test/support/cli.ts) against a real server (each backend), checked by what they printed and by
// what the server then holds.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { exportJWK, generateKeyPair } from "jose";
import { IdentitiesService, IdentitySchema } from "../../src/gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { identityType, parseExpiration } from "../../src/cli/commands/identities.js";
import { CliHome, collapse, normalize, runCli } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";

const GITHUB = "https://token.actions.githubusercontent.com";
const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";
const HOUR = 3_600_000;

type Arg = string | string[];

/**
 * A command line from a template: the literal text splits at spaces, each interpolated value is
 * one argument (or several, from an array). `ok\`iam roles list --parent ${uid}\``
 */
function argv(words: TemplateStringsArray, values: Arg[]): string[] {
  return words.flatMap((text, i) => {
    const value = values[i] ?? []; // json`...` appends one more value after the last word
    return [...text.split(/\s+/).filter(Boolean), ...(Array.isArray(value) ? value : [value])];
  });
}

/** A table with its rows sorted (lists come in uid order, and uids are random), normalized and collapsed. */
function sortedTable(text: string, known: Record<string, string> = {}): string {
  const [header, ...rows] = collapse(normalize(text, known)).trimEnd().split("\n");
  return [header, ...rows.sort()].join("\n") + "\n";
}

describe("identity types (people have no relationship)", () => {
  it("calls an identity without a relationship human, and tells GitHub and GitLab claim matches apart", () => {
    assert.equal(identityType(create(IdentitySchema, { name: "ada", email: "ada@example.com" })), "human");
    const claims = (issuer: string, subject: string) =>
      create(IdentitySchema, {
        relationship: {
          case: "claimMatch",
          value: { iss: { case: "issuer", value: issuer }, sub: { case: "subject", value: subject } },
        },
      });
    assert.equal(identityType(claims(GITHUB, "repo:a/b:ref:refs/heads/main")), "github");
    assert.equal(identityType(claims("https://gitlab.acme.dev", "project_path:a/b:ref_type:tag:ref:v1")), "gitlab");
    assert.equal(identityType(claims("https://issuer.example.com", "bot")), "claim-match");
    assert.equal(
      identityType(create(IdentitySchema, { relationship: { case: "servicePrincipal", value: 1 } })),
      "service-principal",
    );
  });

  it("reads --expiration as an RFC 3339 time or a duration from now", () => {
    const now = Date.parse("2030-01-01T00:00:00Z");
    assert.equal(parseExpiration("720h", now).toISOString(), "2030-01-31T00:00:00.000Z");
    assert.equal(parseExpiration("1h30m", now).toISOString(), "2030-01-01T01:30:00.000Z");
    assert.equal(parseExpiration("2d", now).toISOString(), "2030-01-03T00:00:00.000Z");
    assert.equal(parseExpiration("2030-02-01T12:00:00+02:00", now).toISOString(), "2030-02-01T10:00:00.000Z");
    assert.throws(() => parseExpiration("next week", now), /RFC 3339 time .* or a duration/);
    assert.throws(() => parseExpiration("2029-12-31T00:00:00Z", now), /not in the future/);
  });
});

/** The built-in roles as `roles list` shows them (in uid order: their uids are the same on every install). */
const BUILTIN_ROWS =
  "<uid>  registry.push  Registry Push Role (built-in)  groups.create, groups.list, record_signatures.lis…  yes\n" +
  "<uid>  editor  Editor Role (built-in)  groups.list, group_invites.list, roles.list, role…  yes\n" +
  "<uid>  registry.pull  Registry Pull Role (built-in)  groups.list, record_signatures.list, sboms.list, …  yes\n" +
  "<uid>  viewer  Viewer Role (built-in)  groups.list, group_invites.list, roles.list, role…  yes\n" +
  "<uid>  registry.pull_token_creator  Registry Pull Token Creator Role (built…  groups.list, roles.list, role_bindings.create, re…  yes\n" +
  "<uid>  owner  Owner Role (built-in)  groups.create, groups.update, groups.list, groups…  yes\n";

const NAME_REFUSED = 'bulwark: Invalid argument: name: name must match "^[a-z0-9 ._-]{1,}$".\n';

/** Runs the commands, a few at a time, and checks what each one said. */
async function expectMessages(cases: [() => Promise<string>, RegExp][]): Promise<void> {
  for (let i = 0; i < cases.length; i += 4)
    await Promise.all(cases.slice(i, i + 4).map(async ([run, pattern]) => assert.match(await run(), pattern)));
}

for (const backend of backends()) {
  describe(`bulwark iam identities, roles and role-bindings [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let org: string;
    let jwksFile: string;
    let jwks: string;

    const cli = (args: string[]) =>
      runCli(home, args, { env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken } });
    /** `bulwark <args>` that must succeed quietly; its stdout. */
    const ok = async (words: TemplateStringsArray, ...values: Arg[]) => {
      const args = argv(words, values);
      const r = await cli(args);
      assert.equal(r.code, 0, `bulwark ${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stderr, "");
      return r.stdout;
    };
    /** `bulwark <args> -o json`, parsed. */
    const json = async (words: TemplateStringsArray, ...values: Arg[]) => {
      const stdout = await ok(words, ...values, ["-o", "json"]);
      try {
        return JSON.parse(stdout);
      } catch {
        assert.fail(`bulwark ${argv(words, values).join(" ")} -o json printed ${JSON.stringify(stdout)}`);
      }
    };
    /** The uid a `bulwark <args> -o id` printed. */
    const id = async (words: TemplateStringsArray, ...values: Arg[]) =>
      (await ok(words, ...values, ["-o", "id"])).trim();
    /** `bulwark <args>` that must fail with `code`: its stderr (a message, no stack trace). */
    const fails =
      (code: number) =>
      async (words: TemplateStringsArray, ...values: Arg[]) => {
        const args = argv(words, values);
        const r = await cli(args);
        assert.equal(r.code, code, `bulwark ${args.join(" ")}: exit ${r.code}\n${r.stdout}${r.stderr}`);
        assert.equal(r.stdout, "");
        assert.match(r.stderr, /^(bulwark|error): \S/); // ours, or commander's for its own checks
        assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
        return r.stderr;
      };
    const exit1 = fails(1);
    const exit2 = fails(2);
    const folder = (name: string) => id`iam folders create ${name} --parent ${org}`;
    const childOf = (parent: string) => new RegExp(`^${parent}/[0-9a-f]{16}$`);

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      org = await id`iam organizations create cli-iam`;
      const { publicKey } = await generateKeyPair("ES256", { extractable: true });
      jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), alg: "ES256", use: "sig" }] });
      jwksFile = join(home.dir, "jwks.json");
      writeFileSync(jwksFile, jwks);
    });
    after(async () => {
      home.close();
      await server.close();
    });

    it("has an example in every command's --help, and the output options on each that acts", async () => {
      const commands = [
        ["identities", "create", "github"],
        ["identities", "create", "gitlab"],
        ["identities", "create", "claim-match"],
        ["identities", "create", "static"],
        ["identities", "create", "aws"],
        ["identities", "list"],
        ["identities", "describe"],
        ["identities", "update"],
        ["identities", "delete"],
        ["roles", "create"],
        ["roles", "list"],
        ["roles", "describe"],
        ["roles", "update"],
        ["roles", "delete"],
        ["roles", "capabilities", "list"],
        ["role-bindings", "create"],
        ["role-bindings", "list"],
        ["role-bindings", "describe"],
        ["role-bindings", "update"],
        ["role-bindings", "delete"],
      ];
      const groups = [
        ["identities"],
        ["identities", "create"],
        ["roles"],
        ["roles", "capabilities"],
        ["role-bindings"],
      ];
      await expectMessages([
        ...commands.map((command): [() => Promise<string>, RegExp] => [
          () => ok`iam ${command} --help`,
          /-o, --output <format>[^]*\nExamples:\n {2}bulwark iam /,
        ]),
        ...groups.map((group): [() => Promise<string>, RegExp] => [
          () => ok`iam ${group} --help`,
          /\nExamples:\n {2}bulwark iam /,
        ]),
      ]);
    });

    describe("identities create", { concurrency: true }, () => {
      it("github: any ref of the repo by default, bound to the roles named", async () => {
        const created =
          await json`iam identities create github gh-any --parent ${org} --github-repo acme/app.web --role viewer --role registry.pull --description builds`;
        assert.match(created.uid, childOf(org));
        assert.equal(created.name, "gh-any");
        assert.equal(created.description, "builds");
        assert.deepEqual(created.claimMatch, { issuer: GITHUB, subjectPattern: "repo:acme/app\\.web:ref:.+" });
        const bindings = await json`iam role-bindings list --identity ${created.uid}`;
        const roles = bindings.map(
          (b: { role: { name: string }; group: { uid: string } }) => `${b.role.name}@${b.group.uid}`,
        );
        assert.deepEqual(roles.sort(), [`registry.pull@${org}`, `viewer@${org}`]);
        assert.equal(
          collapse(normalize(await ok`iam identities describe ${created.uid}`)),
          "ID  NAME  TYPE  DESCRIPTION  ROLES  ISSUER  EXPIRES\n" +
            `<uid>  gh-any  github  builds  registry.pull, viewer  ${GITHUB}\n`,
        );
      });

      it("github: one ref, and an audience", async () => {
        const created =
          await json`iam identities create github gh-main --parent ${org} --github-repo acme/app --github-ref refs/heads/main --github-audience bulwark`;
        assert.deepEqual(created.claimMatch, {
          issuer: GITHUB,
          subject: "repo:acme/app:ref:refs/heads/main",
          audience: "bulwark",
        });
      });

      it("gitlab: a branch on gitlab.com, or any ref of a type on a self-hosted GitLab", async () => {
        const [branch, tags] = await Promise.all([
          json`iam identities create gitlab gl-main --parent ${org} --gitlab-project acme/sub/app --gitlab-ref main`,
          json`iam identities create gitlab gl-tags --parent ${org} --gitlab-project acme/app --gitlab-ref-type tag --gitlab-issuer https://gitlab.acme.dev --gitlab-audience bulwark`,
        ]);
        assert.deepEqual(branch.claimMatch, {
          issuer: "https://gitlab.com",
          subject: "project_path:acme/sub/app:ref_type:branch:ref:main",
        });
        assert.deepEqual(tags.claimMatch, {
          issuer: "https://gitlab.acme.dev",
          subjectPattern: "project_path:acme/app:ref_type:tag:ref:.+",
          audience: "bulwark",
        });
        const terse = await ok`iam identities describe gl-tags -o terse`;
        assert.equal(terse, `${tags.uid}\tgl-tags\tgitlab\t\t\thttps://gitlab.acme.dev\t\n`);
      });

      it("claim-match: exact or pattern issuer, subject and audience, and more claims", async () => {
        const created =
          await json`iam identities create claim-match jobs --parent ${org} --identity-issuer-pattern ${"https://.*\\.example\\.com"} --subject job-runner --audience-pattern ${"aud-.*"} --claim env=prod --claim team=a=b --claim-pattern ${"ref=v[0-9]+"}`;
        assert.deepEqual(created.claimMatch, {
          issuerPattern: "https://.*\\.example\\.com",
          subject: "job-runner",
          audiencePattern: "aud-.*",
          claims: { env: "prod", team: "a=b" },
          claimPatterns: { ref: "v[0-9]+" },
        });
      });

      it("static: a JWKS from a file or inline, and an expiration as a duration or a time", async () => {
        const startedAt = Date.now();
        const [fromFile, inline] = await Promise.all([
          json`iam identities create static deploy-key --parent ${org} --issuer https://deploy.example.com --subject deployer --issuer-keys ${jwksFile} --expiration 720h`,
          json`iam identities create static inline-key --parent ${org} --issuer https://deploy.example.com --subject other --issuer-keys ${jwks} --expiration 2099-01-02T03:04:05Z`,
        ]);
        assert.equal(fromFile.staticKeys.issuer, "https://deploy.example.com");
        assert.equal(fromFile.staticKeys.subject, "deployer");
        assert.deepEqual(JSON.parse(fromFile.staticKeys.issuerKeys), JSON.parse(jwks));
        const expires = Date.parse(fromFile.staticKeys.expirationTime);
        assert.ok(expires >= startedAt + 720 * HOUR && expires <= Date.now() + 720 * HOUR);
        assert.equal(inline.staticKeys.expirationTime, "2099-01-02T03:04:05Z");
        assert.equal(
          collapse(normalize(await ok`iam identities describe ${inline.uid} -o wide`, { [inline.uid]: "inline" })),
          "ID  NAME  TYPE  DESCRIPTION  ROLES  ISSUER  EXPIRES  SUBJECT  CREATED\n" +
            "<inline>  inline-key  static  https://deploy.example.com  <time>  other  <time>\n",
        );
        assert.match(
          await ok`iam identities describe ${inline.uid}`,
          /deploy\.example\.com {2}2099-01-02T03:04:05Z\n$/,
        );
      });

      it("aws: an account with an ARN (exact or a pattern) and a user id", async () => {
        const [pattern, exact] = await Promise.all([
          json`iam identities create aws lambda --parent ${org} --aws-account 123456789012 --aws-arn-pattern ${"arn:aws:iam::123456789012:role/.*"} --aws-user-id AIDAEXAMPLE`,
          json`iam identities create aws fn --parent ${org} --aws-account 123456789012 --aws-arn arn:aws:sts::123456789012:assumed-role/app/fn`,
        ]);
        assert.deepEqual(pattern.awsIdentity, {
          awsAccount: "123456789012",
          arnPattern: "arn:aws:iam::123456789012:role/.*",
          userId: "AIDAEXAMPLE",
        });
        assert.deepEqual(exact.awsIdentity, {
          awsAccount: "123456789012",
          arn: "arn:aws:sts::123456789012:assumed-role/app/fn",
        });
      });

      it("prints one table row by default, the uid alone with -o id", async () => {
        const [table, uid] = await Promise.all([
          ok`iam identities create claim-match by-table --parent ${org} --identity-issuer https://issuer.example.com --subject x`,
          id`iam identities create claim-match by-id --parent ${org} --identity-issuer https://issuer.example.com --subject y`,
        ]);
        assert.equal(
          collapse(normalize(table)),
          "ID  NAME  TYPE  DESCRIPTION  ROLES  ISSUER  EXPIRES\n<uid>  by-table  claim-match  https://issuer.example.com\n",
        );
        assert.match(uid, childOf(org));
      });

      it("refuses missing and contradictory flags before calling the server (exit 2)", async () => {
        const create = ["iam", "identities", "create"];
        const issuer = ["--identity-issuer", "https://i.example.com"];
        const keys = ["--issuer", "https://i.example.com", "--subject", "s", "--issuer-keys"];
        await expectMessages([
          [() => exit2`${create} github x --parent ${org}`, /identities create github needs --github-repo$/m],
          [() => exit2`${create} github x --parent ${org} --github-repo acme`, /--github-repo takes owner\/repo/],
          [() => exit2`${create} github x --parent ${org} --github-repo a/b --github-ref main`, /a full ref/],
          [() => exit2`${create} github x --github-repo a/b`, /needs a group: pass --parent/],
          [() => exit2`${create} github x --parent ${org} --issuer y`, /unknown option '--issuer'/],
          [() => exit2`${create} gitlab x --parent ${org}`, /gitlab needs --gitlab-project/],
          [
            () => exit2`${create} gitlab x --parent ${org} --gitlab-project a/b --gitlab-ref-type x`,
            /Allowed choices are branch, tag/,
          ],
          [
            () => exit2`${create} claim-match x --parent ${org} --subject s`,
            /needs --identity-issuer or --identity-issuer-pattern/,
          ],
          [() => exit2`${create} claim-match x --parent ${org} ${issuer}`, /needs --subject or --subject-pattern/],
          [
            () => exit2`${create} claim-match x --parent ${org} ${issuer} --subject s --subject-pattern ${"s.*"}`,
            /--subject and --subject-pattern exclude each other/,
          ],
          [
            () => exit2`${create} claim-match x --parent ${org} ${issuer} --subject-pattern ${"(unclosed"}`,
            /--subject-pattern is not a valid regular expression/,
          ],
          [
            () => exit2`${create} claim-match x --parent ${org} ${issuer} --subject s --claim novalue`,
            /--claim takes key=value/,
          ],
          [
            () => exit2`${create} static x --parent ${org} --issuer https://i.example.com`,
            /static needs --subject, --issuer-keys$/m,
          ],
          [() => exit2`${create} static x --parent ${org} ${keys} ${'{"nokeys": true}'}`, /must be a JWKS/],
          [
            () => exit2`${create} static x --parent ${org} ${keys} ${jwksFile} --expiration soon`,
            /--expiration takes an RFC 3339/,
          ],
          [
            () => exit2`${create} static x --parent ${org} ${keys} ${jwksFile} --expiration 2001-01-01T00:00:00Z`,
            /not in the future/,
          ],
          [
            () => exit2`${create} aws x --parent ${org} --aws-account 123456789012`,
            /needs --aws-arn or --aws-arn-pattern/,
          ],
          [() => exit2`${create} aws x --parent ${org} --aws-account 12 --aws-arn arn:x`, /12-digit AWS account/],
          // a file that is not there is an error, not a usage error
          [
            () => exit1`${create} static x --parent ${org} ${keys} ${join(home.dir, "no.json")}`,
            /cannot read the JWKS file .*no\.json: no such file/,
          ],
        ]);
      });

      it("a server refusal is its message as a sentence (exit 1); an unknown role stops it before anything is made", async () => {
        assert.equal(
          await exit1`iam identities create github ${"Bad Name!"} --parent ${org} --github-repo a/b`,
          NAME_REFUSED,
        );
        assert.match(
          await exit1`iam identities create github norole --parent ${org} --github-repo a/b --role no-such-role`,
          /no role named "no-such-role" is usable in group [0-9a-f]{40}/,
        );
        assert.deepEqual(await json`iam identities list --name norole`, []);
      });
    });

    describe("identities list", { concurrency: true }, () => {
      let listed: string;

      before(async () => {
        listed = await folder("listed");
        await Promise.all([
          ok`iam identities create github release --parent ${listed} --github-repo acme/app --github-ref refs/tags/v1 --role registry.push --role viewer --description ${"publishes releases"}`,
          ok`iam identities create static signer --parent ${listed} --issuer https://signer.example.com --subject signer --issuer-keys ${jwksFile} --expiration 2099-12-31T00:00:00Z`,
          ok`iam identities create aws worker --parent ${listed} --aws-account 210987654321 --aws-arn arn:aws:iam::210987654321:role/worker --role viewer`,
        ]);
      });

      it("shows each identity's type, roles, issuer and expiry (wide: subject and creation too)", async () => {
        assert.equal(
          sortedTable(await ok`iam identities list --parent ${listed}`),
          "ID  NAME  TYPE  DESCRIPTION  ROLES  ISSUER  EXPIRES\n" +
            `<uid>  release  github  publishes releases  registry.push, viewer  ${GITHUB}\n` +
            "<uid>  signer  static  https://signer.example.com  <time>\n" +
            "<uid>  worker  aws  viewer\n",
        );
        assert.equal(
          sortedTable(await ok`iam identities list --parent ${listed} -o wide`),
          "ID  NAME  TYPE  DESCRIPTION  ROLES  ISSUER  EXPIRES  SUBJECT  CREATED\n" +
            `<uid>  release  github  publishes releases  registry.push, viewer  ${GITHUB}  repo:acme/app:ref:refs/tags/v1  <time>\n` +
            "<uid>  signer  static  https://signer.example.com  <time>  signer  <time>\n" +
            "<uid>  worker  aws  viewer  arn:aws:iam::210987654321:role/worker  <time>\n",
        );
        const terse = (await ok`iam identities list --parent ${listed} -o terse`).trim().split("\n");
        assert.deepEqual(terse.map((line) => line.split("\t").slice(1, 3)).sort(), [
          ["release", "github"],
          ["signer", "static"],
          ["worker", "aws"],
        ]);
      });

      it("JSON is the API's identities; -o id their uids; --limit stops early", async () => {
        const [all, ids, two] = await Promise.all([
          json`iam identities list --parent ${listed}`,
          ok`iam identities list --parent ${listed} -o id`,
          ok`iam identities list --parent ${listed} -o id --limit 2`,
        ]);
        const release = all.find((i: { name: string }) => i.name === "release");
        assert.deepEqual(Object.keys(release).sort(), [
          "claimMatch",
          "createTime",
          "description",
          "lastSeenTime",
          "name",
          "uid",
          "updateTime",
        ]);
        assert.deepEqual(ids.trim().split("\n").sort(), all.map((i: { uid: string }) => i.uid).sort());
        assert.equal(two.trim().split("\n").length, 2);
        assert.match(await exit2`iam identities list --limit -1`, /whole number/);
      });

      it("is recursive from an organization, and filters by name and type", async () => {
        const [all, byName, github, gitlab, aws] = await Promise.all([
          json`iam identities list --parent ${org}`,
          json`iam identities list --parent ${org} --name worker`,
          json`iam identities list --parent ${org} --type github`,
          ok`iam identities list --type gitlab -o terse`,
          json`iam identities list --parent ${org} --type aws --limit 2`,
        ]);
        const names = all.map((i: { name: string }) => i.name);
        for (const name of ["gh-any", "lambda", "release", "signer", "worker"]) assert.ok(names.includes(name), name);
        assert.equal(byName.length, 1);
        assert.match(byName[0].uid, childOf(listed));
        const githubNames = github.map((i: { name: string }) => i.name);
        for (const name of ["gh-any", "gh-main", "release"]) assert.ok(githubNames.includes(name), name);
        assert.ok(github.every((i: { claimMatch?: { issuer?: string } }) => i.claimMatch?.issuer === GITHUB));
        const gitlabNames = gitlab
          .trim()
          .split("\n")
          .map((l) => l.split("\t")[1]);
        assert.deepEqual(gitlabNames.sort(), ["gl-main", "gl-tags"]);
        assert.equal(aws.length, 2);
        assert.ok(aws.every((i: { awsIdentity?: unknown }) => i.awsIdentity));
        assert.match(await exit2`iam identities list --type robot`, /Allowed choices are github, gitlab/);
      });

      it("walks every page of a long list", async () => {
        const many = await folder("many");
        const client = createClient(
          IdentitiesService,
          createConnectTransport({
            baseUrl: server.url,
            httpVersion: "1.1",
            interceptors: [bearer(server.operatorToken)],
          }),
        );
        const subjects = Array.from({ length: 205 }, (_, i) => `s${i}`);
        for (let start = 0; start < subjects.length; start += 25)
          await Promise.all(
            subjects.slice(start, start + 25).map((subject) =>
              client.createIdentity({
                parent: many,
                identity: {
                  name: `bulk-${subject}`,
                  relationship: {
                    case: "claimMatch",
                    value: {
                      iss: { case: "issuer", value: "https://bulk.example.com" },
                      sub: { case: "subject", value: subject },
                    },
                  },
                },
              }),
            ),
          );
        const [ids, limited, table] = await Promise.all([
          ok`iam identities list --parent ${many} -o id`,
          ok`iam identities list --parent ${many} -o id --limit 203`,
          ok`iam identities list --parent ${many}`,
        ]);
        assert.equal(new Set(ids.trim().split("\n")).size, 205);
        assert.equal(limited.trim().split("\n").length, 203);
        assert.equal(table.trim().split("\n").length, 206);
      });
    });

    describe("identities update and delete", { concurrency: true }, () => {
      let changes: string;
      before(async () => {
        changes = await folder("changes");
      });

      it("update: name and description, each changed only when given", async () => {
        const uid =
          await id`iam identities create claim-match renamed --parent ${changes} --description ${"keep me"} --identity-issuer https://issuer.example.com --subject a`;
        const named = await json`iam identities update ${uid} --name renamed-2`;
        assert.equal(named.name, "renamed-2");
        assert.equal(named.description, "keep me");
        const cleared = await json`iam identities update renamed-2 --description ${""}`;
        assert.equal(cleared.description, undefined);
        assert.equal(cleared.name, "renamed-2");
        assert.match(await exit2`iam identities update ${uid}`, /nothing to change/);
      });

      it("update: what may assume a claim-match, static or aws identity", async () => {
        const [github, signer, worker] = await Promise.all([
          id`iam identities create github moving --parent ${changes} --github-repo acme/app --github-ref refs/heads/main`,
          id`iam identities create static re-signer --parent ${changes} --issuer https://signer.example.com --subject signer --issuer-keys ${jwksFile} --expiration 720h`,
          id`iam identities create aws re-worker --parent ${changes} --aws-account 210987654321 --aws-arn arn:aws:iam::210987654321:role/worker`,
        ]);
        const moved =
          await json`iam identities update ${github} --subject-pattern ${"repo:acme/app:ref:refs/tags/.*"} --audience x`;
        assert.deepEqual(moved.claimMatch, {
          issuer: GITHUB,
          subjectPattern: "repo:acme/app:ref:refs/tags/.*",
          audience: "x",
        });

        const renewed = await json`iam identities update ${signer} --expiration 2098-01-01T00:00:00Z`;
        assert.equal(renewed.staticKeys.expirationTime, "2098-01-01T00:00:00Z");
        assert.equal(renewed.staticKeys.subject, "signer");
        const { publicKey } = await generateKeyPair("ES256", { extractable: true });
        const rotated = JSON.stringify({ keys: [await exportJWK(publicKey)] });
        const rekeyed = await json`iam identities update ${signer} --issuer-keys ${rotated}`;
        assert.deepEqual(JSON.parse(rekeyed.staticKeys.issuerKeys), JSON.parse(rotated));
        assert.equal(rekeyed.staticKeys.expirationTime, "2098-01-01T00:00:00Z");

        const widened =
          await json`iam identities update re-worker --aws-arn-pattern ${"arn:aws:iam::210987654321:role/.*"}`;
        assert.equal(widened.uid, worker);
        assert.deepEqual(widened.awsIdentity, {
          awsAccount: "210987654321",
          arnPattern: "arn:aws:iam::210987654321:role/.*",
        });

        await expectMessages([
          [
            () => exit2`iam identities update ${github} --expiration 24h`,
            /moving is a github identity: --expiration is for static identities/,
          ],
          [
            () => exit2`iam identities update ${signer} --subject a`,
            /re-signer is a static identity: --subject is for claim-match identities/,
          ],
          [
            () => exit2`iam identities update ${github} --subject a --aws-arn arn:x`,
            /--subject and --aws-arn are for different kinds of identity/,
          ],
          [() => exit2`iam identities update ${github} --subject a --subject-pattern b`, /exclude each other/],
        ]);
      });

      it("update: the server's refusal as a sentence (exit 1)", async () => {
        const uid =
          await id`iam identities create claim-match refused --parent ${changes} --identity-issuer https://issuer.example.com --subject r`;
        assert.equal(await exit1`iam identities update ${uid} --name ${"Not Valid"}`, NAME_REFUSED);
        assert.match(await exit1`iam identities describe nobody`, /no identity named "nobody" is visible to you/);
      });

      it("delete: asks for --yes off a terminal (exit 2), then deletes it with its role bindings", async () => {
        const uid =
          await id`iam identities create claim-match doomed --parent ${changes} --role viewer --role editor --identity-issuer https://issuer.example.com --subject doomed`;
        assert.match(
          await exit2`iam identities delete ${uid}`,
          /Delete the identity doomed \(.*\) and its 2 role bindings\? Pass --yes to confirm/,
        );
        assert.equal((await json`iam identities describe ${uid}`).uid, uid);
        assert.equal(
          collapse(normalize(await ok`iam identities delete ${uid} --yes`)),
          "deleted identity doomed (<uid>)\n",
        );
        assert.match(await exit1`iam identities describe ${uid}`, /not found/i);
        assert.deepEqual(await json`iam role-bindings list --identity ${uid}`, []);

        const other =
          await id`iam identities create claim-match doomed-2 --parent ${changes} --identity-issuer https://issuer.example.com --subject doomed-2`;
        assert.equal(await ok`iam identities delete doomed-2 --yes -o id`, `${other}\n`);
        assert.match(await exit1`iam identities delete ${uid} --yes`, /not found/i);
      });
    });

    describe("roles", { concurrency: true }, () => {
      let teams: string;
      before(async () => {
        teams = await folder("teams");
      });

      it("capabilities list: every capability a role may hold, without a server", async () => {
        const offline = (...args: string[]) =>
          runCli(home, ["iam", "roles", "capabilities", "list", ...args], {
            env: { BULWARK_API_URL: "http://127.0.0.1:9" },
          });
        const [table, all, ids] = await Promise.all([offline(), offline("--all", "-o", "json"), offline("-o", "id")]);
        assert.equal(table.code, 0, table.stderr);
        const [header, ...names] = table.stdout.trim().split("\n");
        assert.equal(header, "NAME");
        for (const name of ["groups.list", "identity.create", "role_bindings.create", "repo.list"])
          assert.ok(names.includes(name), name);
        assert.ok(!names.includes("internal") && !names.includes("repo.internal.admin"));
        assert.deepEqual(names, [...names].sort());
        assert.deepEqual(ids.stdout.trim().split("\n"), names);
        const everything = JSON.parse(all.stdout);
        assert.ok(everything.length > names.length);
        assert.deepEqual(
          everything.find((c: { name: string }) => c.name === "groups.list"),
          { name: "groups.list", enum: "CAP_IAM_GROUPS_LIST", internal: false },
        );
        assert.equal(everything.find((c: { name: string }) => c.name === "repo.internal.admin").internal, true);
      });

      it("create, describe (by name or uid), and list with the built-in roles", async () => {
        const role =
          await json`iam roles create auditor --parent ${teams} --capabilities groups.list,roles.list --capabilities CAP_IAM_IDENTITY_LIST --description ${"reads IAM"}`;
        assert.match(role.uid, childOf(teams));
        assert.deepEqual(role.capabilities, ["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST", "CAP_IAM_IDENTITY_LIST"]);
        const [byName, wide, listed, everything, viewer, two, seven] = await Promise.all([
          json`iam roles describe auditor`,
          ok`iam roles describe ${role.uid} -o wide`,
          ok`iam roles list --parent ${teams}`,
          json`iam roles list`,
          ok`iam roles list --name viewer -o id`,
          ok`iam roles list -o id --limit 2`,
          ok`iam roles list --parent ${teams} -o terse --limit 7`,
        ]);
        assert.equal(byName.uid, role.uid);
        assert.equal(
          collapse(normalize(wide)),
          "ID  NAME  DESCRIPTION  CAPABILITIES  BUILT-IN  CREATED\n" +
            "<uid>  auditor  reads IAM  groups.list, roles.list, identity.list  no  <time>\n",
        );
        assert.equal(
          collapse(normalize(listed)),
          "ID  NAME  DESCRIPTION  CAPABILITIES  BUILT-IN\n" +
            BUILTIN_ROWS +
            "<uid>  auditor  reads IAM  groups.list, roles.list, identity.list  no\n",
        );
        const names = everything.map((r: { name: string }) => r.name);
        for (const name of ["viewer", "editor", "owner", "registry.pull", "registry.push", "auditor"])
          assert.ok(names.includes(name), name);
        assert.equal(viewer, `${VIEWER}\n`);
        assert.equal(two.trim().split("\n").length, 2);
        assert.equal(
          seven.trim().split("\n")[6],
          `${role.uid}\tauditor\treads IAM\tgroups.list, roles.list, identity.list\tno`,
        );
      });

      it("refuses unknown and internal capabilities locally, naming close matches (exit 2)", async () => {
        await expectMessages([
          [
            () => exit2`iam roles create typo --parent ${teams} --capabilities group.list`,
            /unknown capability "group\.list": did you mean groups\.list\b/,
          ],
          [
            () => exit2`iam roles create internal --parent ${teams} --capabilities repo.internal.admin`,
            /repo\.internal\.admin is for the platform's own services/,
          ],
          [() => exit2`iam roles create none --parent ${teams}`, /needs --capabilities/],
          [() => exit2`iam roles create blank --parent ${teams} --capabilities ,`, /name at least one capability/],
          [
            () => exit2`iam roles update auditor --add-capabilities nonsense.thing`,
            /unknown capability "nonsense\.thing"/,
          ],
        ]);
      });

      it("update: name, description, and the capabilities (replaced, added, removed)", async () => {
        const uid = await id`iam roles create builder --parent ${org} --capabilities repo.list`;
        const added =
          await json`iam roles update ${uid} --add-capabilities tag.list,manifest.list --description builds`;
        assert.deepEqual([...added.capabilities].sort(), ["CAP_MANIFEST_LIST", "CAP_REPO_LIST", "CAP_TAG_LIST"]);
        assert.equal(added.description, "builds");
        const removed = await json`iam roles update builder --remove-capabilities repo.list --name builder-2`;
        assert.deepEqual([...removed.capabilities].sort(), ["CAP_MANIFEST_LIST", "CAP_TAG_LIST"]);
        assert.equal(removed.name, "builder-2");
        assert.equal(removed.description, "builds");
        const replaced = await json`iam roles update ${uid} --capabilities groups.list`;
        assert.deepEqual(replaced.capabilities, ["CAP_IAM_GROUPS_LIST"]);
        await expectMessages([
          [() => exit2`iam roles update ${uid}`, /nothing to change/],
          [
            () => exit2`iam roles update ${uid} --capabilities groups.list --add-capabilities repo.list`,
            /--capabilities replaces the set/,
          ],
          [() => exit2`iam roles update ${uid} --remove-capabilities groups.list`, /at least one capability/],
          [() => exit1`iam roles update viewer --description x`, /viewer is a built-in role: it cannot be changed/],
          [
            () => exit1`iam roles update ${uid} --name ${"Bad Name"}`,
            /^bulwark: Invalid argument: name: name must match/,
          ],
        ]);
      });

      it("delete: --yes off a terminal, and never a built-in role", async () => {
        const uid = await id`iam roles create temporary --parent ${org} --capabilities repo.list`;
        assert.match(await exit2`iam roles delete ${uid}`, /Delete the role temporary \(.*\)\? Pass --yes/);
        assert.equal(
          collapse(normalize(await ok`iam roles delete temporary --yes`)),
          "deleted role temporary (<uid>)\n",
        );
        assert.match(await exit1`iam roles describe ${uid}`, /not found/i);
        assert.match(await exit1`iam roles delete viewer --yes`, /viewer is a built-in role: it cannot be deleted/);
      });
    });

    describe("role-bindings", { concurrency: true }, () => {
      let crew: string;
      let robot: string;
      before(async () => {
        crew = await folder("crew");
        [robot] = await Promise.all([
          id`iam identities create claim-match robot --parent ${crew} --identity-issuer https://robot.example.com --subject robot`,
          ok`iam roles create crew-role --parent ${crew} --capabilities repo.list`,
        ]);
      });

      it("create by identity and role name or uid, list, describe, update, delete", async () => {
        const binding = await json`iam role-bindings create --identity robot --role viewer --parent ${crew}`;
        assert.equal(binding.identityUid, robot);
        assert.equal(binding.roleUid, VIEWER);
        assert.equal(binding.group.uid, crew);
        assert.equal(binding.role.name, "viewer");
        const custom = await id`iam rolebindings create --identity ${robot} --role crew-role --parent ${crew}`;
        assert.match(custom, childOf(crew));

        const [table, wide, byRoleUid, limited, described] = await Promise.all([
          ok`iam role-bindings list --parent ${crew}`,
          ok`iam role-bindings list --identity robot --role viewer -o wide`,
          ok`iam role-bindings list --role ${VIEWER} --parent ${crew} -o id`,
          ok`iam role-bindings list --parent ${crew} -o id --limit 1`,
          json`iam role-bindings describe ${binding.uid}`,
        ]);
        assert.equal(
          sortedTable(table),
          "ID  IDENTITY  ROLE  GROUP\n<uid>  robot  crew-role  crew\n<uid>  robot  viewer  crew\n",
        );
        assert.equal(
          sortedTable(wide, { [binding.uid]: "binding", [robot]: "robot", [crew]: "crew", [VIEWER]: "viewer" }),
          "ID  IDENTITY  ROLE  GROUP  IDENTITY ID  ROLE ID  GROUP ID  CREATED\n" +
            "<binding>  robot  viewer  crew  <robot>  <viewer>  <crew>  <time>\n",
        );
        assert.equal(byRoleUid, `${binding.uid}\n`);
        assert.equal(limited.trim().split("\n").length, 1);
        assert.deepEqual(described, binding);

        const updated = await json`iam role-bindings update ${binding.uid} --role editor`;
        assert.equal(updated.role.name, "editor");
        assert.equal(updated.identityUid, robot);
        assert.match(await exit2`iam role-bindings update ${binding.uid}`, /needs --role/);

        assert.match(await exit2`iam role-bindings delete ${binding.uid}`, /\(robot as editor in crew\)\? Pass --yes/);
        assert.equal(await ok`iam role-bindings delete ${binding.uid} --yes -o id`, `${binding.uid}\n`);
        assert.match(
          await ok`iam role-bindings delete ${custom} --yes`,
          /^deleted the role binding .* \(robot as crew-role in crew\)\n$/,
        );
        assert.deepEqual(await json`iam role-bindings list --parent ${crew}`, []);
        assert.equal(await ok`iam role-bindings list --parent ${crew}`, "ID  IDENTITY  ROLE  GROUP\n");
      });

      it("refuses a missing flag (exit 2), an unknown or unusable role or identity, a duplicate (exit 1)", async () => {
        const [elsewhere, other] = await Promise.all([
          folder("elsewhere"),
          id`iam identities create claim-match other-robot --parent ${org} --identity-issuer https://robot.example.com --subject other`,
        ]);
        await ok`iam role-bindings create --identity ${other} --role viewer --parent ${elsewhere}`;
        await expectMessages([
          [
            () => exit2`iam role-bindings create --role viewer --parent ${crew}`,
            /role-bindings create needs --identity$/m,
          ],
          [() => exit2`iam role-bindings create --identity ${robot} --role viewer`, /needs a group: pass --parent/],
          [
            () => exit1`iam role-bindings create --identity ${robot} --role nope --parent ${crew}`,
            /no role named "nope" is usable in group/,
          ],
          [
            () => exit1`iam role-bindings create --identity ghost --role viewer --parent ${crew}`,
            /no identity named "ghost" is visible/,
          ],
          // a folder's role cannot be bound in another folder
          [
            () => exit1`iam role-bindings create --identity ${other} --role crew-role --parent ${elsewhere}`,
            /no role named "crew-role" is usable in group/,
          ],
          [
            () => exit1`iam role-bindings create --identity ${other} --role viewer --parent ${elsewhere}`,
            /^bulwark: .*already/i,
          ],
          [() => exit1`iam role-bindings describe ${`${crew}/0000000000000000`}`, /not found/i],
        ]);
      });
    });
  });
}
