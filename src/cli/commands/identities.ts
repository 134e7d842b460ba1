// `bulwark iam identities`: assumable identities (a CI job's OIDC claims, a static JWKS, an AWS
// principal), and `bulwark iam role-bindings`, which grant them (or people) roles in a group.
// Both live here because creating an identity binds its --role(s), and bindings name identities.
import { readFile } from "node:fs/promises";
import { clone, create, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Option, type Command } from "commander";
import {
  IdentitiesService,
  IdentitySchema,
  Identity_AWSIdentitySchema,
  Identity_ClaimMatchSchema,
  Identity_StaticKeysSchema,
  RelationshipType,
  ServicePrincipal,
  type Identity,
} from "../../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import {
  RoleBindingSchema,
  RoleBindingsService,
  type RoleBinding,
} from "../../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import type { Role } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { isValidUidp, parentOf } from "../../core/uidp.js";
import { clientCommand, examples, repeatable, run } from "../command.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, messageView, time, type View } from "../output.js";
import type { Session } from "../session.js";
import { patternProblem } from "../../core/patterns.js";
import { durationMillis } from "../durations.js";
import { parentUid, resolveIdentity, resolveRole } from "../resolve.js";

export const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";
export const GITLAB_ISSUER = "https://gitlab.com";

export const IDENTITY_TYPES = [
  "github",
  "gitlab",
  "claim-match",
  "static",
  "aws",
  "service-principal",
  "human",
] as const;
export type IdentityType = (typeof IDENTITY_TYPES)[number];

/** What the TYPE column says: the relationship, with GitHub and GitLab claim matches told apart; people have none. */
export function identityType(identity: Identity): IdentityType {
  const r = identity.relationship;
  switch (r.case) {
    case "claimMatch":
      if (r.value.iss.value === GITHUB_ISSUER) return "github";
      if (r.value.sub.value?.startsWith("project_path:")) return "gitlab";
      return "claim-match";
    case "staticKeys":
      return "static";
    case "awsIdentity":
      return "aws";
    case "servicePrincipal":
      return "service-principal";
    default:
      return "human";
  }
}

/** The server's filter for a TYPE (github and gitlab are claim matches; people have no relationship to filter on). */
const SERVER_TYPE: Record<IdentityType, RelationshipType> = {
  github: RelationshipType.CLAIM_MATCH,
  gitlab: RelationshipType.CLAIM_MATCH,
  "claim-match": RelationshipType.CLAIM_MATCH,
  static: RelationshipType.STATIC,
  aws: RelationshipType.AWS_IDENTITY,
  "service-principal": RelationshipType.SERVICE_PRINCIPAL,
  human: RelationshipType.UNSPECIFIED,
};

function issuerOf(identity: Identity): string {
  const r = identity.relationship;
  if (r.case === "claimMatch") return r.value.iss.value ?? "";
  if (r.case === "staticKeys") return r.value.issuer;
  return "";
}

function subjectOf(identity: Identity): string {
  const r = identity.relationship;
  if (r.case === "claimMatch") return r.value.sub.value ?? "";
  if (r.case === "staticKeys") return r.value.subject;
  if (r.case === "awsIdentity") return r.value.awsArn.value ?? "";
  if (r.case === "servicePrincipal") return ServicePrincipal[r.value] ?? String(r.value);
  return identity.email;
}

/** An identity and the names of the roles bound to it (the API's JSON is the identity alone). */
export interface IdentityRow {
  identity: Identity;
  roles: string[];
}

export const identityView: View<IdentityRow> = {
  columns: [
    { header: "ID", value: (r) => r.identity.uid },
    { header: "NAME", value: (r) => r.identity.name },
    { header: "TYPE", value: (r) => identityType(r.identity) },
    { header: "DESCRIPTION", value: (r) => r.identity.description, max: 40 },
    { header: "ROLES", value: (r) => r.roles.join(", "), max: 40 },
    { header: "ISSUER", value: (r) => issuerOf(r.identity), max: 50 },
    {
      header: "EXPIRES",
      value: (r) =>
        r.identity.relationship.case === "staticKeys" ? time(r.identity.relationship.value.expirationTime) : "",
    },
    { header: "SUBJECT", value: (r) => subjectOf(r.identity), wide: true },
    { header: "CREATED", value: (r) => time(r.identity.createTime), wide: true },
  ],
  id: (r) => r.identity.uid,
  json: (r) => toJson(IdentitySchema, r.identity),
};

export const bindingView = messageView(RoleBindingSchema, [
  { header: "ID", value: (b) => b.uid },
  { header: "IDENTITY", value: (b) => b.identity?.name ?? "" },
  { header: "ROLE", value: (b) => b.role?.name ?? "" },
  { header: "GROUP", value: (b) => b.group?.name ?? "" },
  { header: "IDENTITY ID", value: (b) => b.identityUid, wide: true },
  { header: "ROLE ID", value: (b) => b.roleUid, wide: true },
  { header: "GROUP ID", value: (b) => b.group?.uid ?? "", wide: true },
  { header: "CREATED", value: (b) => time(b.createTime), wide: true },
]);

async function listIdentityPages(
  session: Session,
  filter: { descendantsOf?: string; name?: string; type?: RelationshipType },
  limit?: number,
): Promise<Identity[]> {
  const client = session.client(IdentitiesService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() =>
      client.listIdentities({
        uidp: { descendantsOf: filter.descendantsOf ?? "" },
        name: filter.name ?? "",
        relationshipType: filter.type ?? RelationshipType.UNSPECIFIED,
        pageSize,
        pageToken,
      }),
    );
    return { items: res.identities, nextPageToken: res.nextPageToken };
  }, limit);
}

/**
 * Deletes an identity and its role bindings (`bound`, when the caller listed them already): the
 * server keeps an identity that still holds roles, so the bindings go first.
 */
export async function deleteIdentityWithBindings(session: Session, uid: string, bound?: RoleBinding[]): Promise<void> {
  const client = session.client(RoleBindingsService);
  for (const b of bound ?? (await listBindings(session, { identity: uid })))
    await session.call(() => client.deleteRoleBinding({ uid: b.uid }));
  await session.call(() => session.client(IdentitiesService).deleteIdentity({ uid }));
}

async function listBindings(
  session: Session,
  filter: { descendantsOf?: string; identity?: string; role?: string },
  limit?: number,
): Promise<RoleBinding[]> {
  const client = session.client(RoleBindingsService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() =>
      client.listRoleBindings({
        uidp: { descendantsOf: filter.descendantsOf ?? "" },
        identity: filter.identity ?? "",
        role: filter.role ?? "",
        pageSize,
        pageToken,
      }),
    );
    return { items: res.roleBindings, nextPageToken: res.nextPageToken };
  }, limit);
}

/** Only the table forms show roles: the others are spared the role-binding lookup. */
const showsRoles = (format: string) => format === "table" || format === "wide" || format === "terse";

/** The identities with the names of their roles, from the role bindings in `scope`. */
async function withRoles(
  session: Session,
  format: string,
  identities: Identity[],
  scope: { descendantsOf?: string; identity?: string },
): Promise<IdentityRow[]> {
  if (!showsRoles(format) || identities.length === 0) return identities.map((identity) => ({ identity, roles: [] }));
  const names = new Map<string, Set<string>>();
  for (const b of await listBindings(session, scope)) {
    const set = names.get(b.identityUid) ?? new Set<string>();
    set.add(b.role?.name ?? b.roleUid);
    names.set(b.identityUid, set);
  }
  return identities.map((identity) => ({ identity, roles: [...(names.get(identity.uid) ?? [])].sort() }));
}

async function describeIdentity(session: Session, format: string, identity: Identity): Promise<IdentityRow> {
  return (await withRoles(session, format, [identity], { identity: identity.uid }))[0]!;
}

// ---- flag checks, before anything is sent ----

const given = (value: string | undefined): value is string => value !== undefined && value !== "";

/** The one of several exclusive flags that was given (a oneof's case), or none. */
function oneOf<C extends string>(
  what: string,
  choices: { flag: string; value: string | undefined; case: C }[],
  required: boolean,
): { case: C; value: string } | { case: undefined; value?: undefined } {
  const present = choices.filter((c) => given(c.value));
  if (present.length > 1)
    throw new UsageError(`${present.map((c) => c.flag).join(" and ")} exclude each other: pass one`);
  const [choice] = present;
  if (choice) return { case: choice.case, value: choice.value! };
  if (required) throw new UsageError(`${what} needs ${choices.map((c) => c.flag).join(" or ")}`);
  return { case: undefined };
}

function requireFlags(what: string, flags: Record<string, string | undefined>): void {
  const missing = Object.entries(flags)
    .filter(([, value]) => !given(value))
    .map(([flag]) => flag);
  if (missing.length) throw new UsageError(`${what} needs ${missing.join(", ")}`);
}

/** The server matches patterns whole, as Unicode regular expressions: check they compile the same way. */
/** The server's own rule for patterns (core/patterns.ts), checked before anything is sent. */
function checkPattern(flag: string, pattern: string | undefined): void {
  const problem = pattern === undefined ? undefined : patternProblem(pattern);
  // "--subject-pattern is not a valid regular expression: …", "--subject-pattern: pattern must be at most …"
  if (problem) throw new UsageError(problem.startsWith("not ") ? `${flag} is ${problem}` : `${flag}: ${problem}`);
}

/** Text that matches itself in a pattern. */
function literal(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
}

function keyValues(flag: string, pairs: string[] | undefined, patterns = false): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const at = pair.indexOf("=");
    if (at <= 0) throw new UsageError(`${flag} takes key=${patterns ? "regex" : "value"}, got ${JSON.stringify(pair)}`);
    const value = pair.slice(at + 1);
    if (patterns) checkPattern(`${flag} ${pair.slice(0, at)}`, value);
    out[pair.slice(0, at)] = value;
  }
  return out;
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

/** --expiration: an RFC 3339 time, or a duration from now; in the future either way. */
export function parseExpiration(text: string, now = Date.now()): Date {
  const duration = durationMillis(text.trim());
  const at =
    duration !== undefined ? new Date(now + duration) : RFC3339.test(text.trim()) ? new Date(text.trim()) : undefined;
  if (!at || Number.isNaN(at.getTime()))
    throw new UsageError(
      `--expiration takes an RFC 3339 time (2030-01-31T00:00:00Z) or a duration (720h), got ${JSON.stringify(text)}`,
    );
  if (at.getTime() <= now) throw new UsageError(`--expiration ${text} is not in the future`);
  return at;
}

/** --issuer-keys: the JWKS itself, or a file holding it. */
async function readIssuerKeys(value: string): Promise<string> {
  const inline = value.trim().startsWith("{");
  const text = inline
    ? value
    : await readFile(value, "utf8").catch((err: NodeJS.ErrnoException) => {
        throw new CliError(
          `cannot read the JWKS file ${value}: ${err.code === "ENOENT" ? "no such file" : err.message}`,
        );
      });
  let keys: unknown;
  try {
    keys = (JSON.parse(text) as { keys?: unknown } | null)?.keys;
  } catch {
    keys = undefined;
  }
  if (!Array.isArray(keys) || keys.length === 0)
    throw new UsageError(
      `--issuer-keys ${inline ? "" : `(${value}) `}must be a JWKS: JSON with a non-empty "keys" array`,
    );
  return text.trim();
}

// ---- identities create <kind> ----

type Relationship = Identity["relationship"];

function claimMatch(init: MessageInitShape<typeof Identity_ClaimMatchSchema>): Relationship {
  return { case: "claimMatch", value: create(Identity_ClaimMatchSchema, init) };
}

interface GithubFlags {
  githubRepo?: string;
  githubRef?: string;
  githubAudience?: string;
}

function githubRelationship(opts: GithubFlags): Relationship {
  requireFlags("identities create github", { "--github-repo": opts.githubRepo });
  const repo = opts.githubRepo!;
  if (!/^[\w.-]+\/[\w.-]+$/.test(repo))
    throw new UsageError(`--github-repo takes owner/repo, got ${JSON.stringify(repo)}`);
  if (given(opts.githubRef) && !opts.githubRef.startsWith("refs/"))
    throw new UsageError(
      `--github-ref takes a full ref (refs/heads/main, refs/tags/v1), got ${JSON.stringify(opts.githubRef)}`,
    );
  return claimMatch({
    iss: { case: "issuer", value: GITHUB_ISSUER },
    sub: given(opts.githubRef)
      ? { case: "subject", value: `repo:${repo}:ref:${opts.githubRef}` }
      : { case: "subjectPattern", value: `repo:${literal(repo)}:ref:.+` },
    aud: given(opts.githubAudience) ? { case: "audience", value: opts.githubAudience } : { case: undefined },
  });
}

interface GitlabFlags {
  gitlabProject?: string;
  gitlabRef?: string;
  gitlabRefType?: string;
  gitlabIssuer?: string;
  gitlabAudience?: string;
}

function gitlabRelationship(opts: GitlabFlags): Relationship {
  requireFlags("identities create gitlab", { "--gitlab-project": opts.gitlabProject });
  const project = opts.gitlabProject!;
  if (!/^[\w.-]+(\/[\w.-]+)+$/.test(project))
    throw new UsageError(`--gitlab-project takes group/project, got ${JSON.stringify(project)}`);
  const path = `project_path:${project}:ref_type:`;
  return claimMatch({
    iss: { case: "issuer", value: opts.gitlabIssuer ?? GITLAB_ISSUER },
    sub: given(opts.gitlabRef)
      ? { case: "subject", value: `${path}${opts.gitlabRefType ?? "branch"}:ref:${opts.gitlabRef}` }
      : { case: "subjectPattern", value: `${literal(path)}${opts.gitlabRefType ?? "(?:branch|tag)"}:ref:.+` },
    aud: given(opts.gitlabAudience) ? { case: "audience", value: opts.gitlabAudience } : { case: undefined },
  });
}

interface ClaimMatchFlags {
  identityIssuer?: string;
  identityIssuerPattern?: string;
  subject?: string;
  subjectPattern?: string;
  audience?: string;
  audiencePattern?: string;
}

function issuerChoice(opts: ClaimMatchFlags, required: boolean) {
  checkPattern("--identity-issuer-pattern", opts.identityIssuerPattern);
  return oneOf(
    "identities create claim-match",
    [
      { flag: "--identity-issuer", value: opts.identityIssuer, case: "issuer" as const },
      { flag: "--identity-issuer-pattern", value: opts.identityIssuerPattern, case: "issuerPattern" as const },
    ],
    required,
  );
}

function subjectChoice(opts: ClaimMatchFlags, required: boolean) {
  checkPattern("--subject-pattern", opts.subjectPattern);
  return oneOf(
    "identities create claim-match",
    [
      { flag: "--subject", value: opts.subject, case: "subject" as const },
      { flag: "--subject-pattern", value: opts.subjectPattern, case: "subjectPattern" as const },
    ],
    required,
  );
}

function audienceChoice(opts: ClaimMatchFlags) {
  checkPattern("--audience-pattern", opts.audiencePattern);
  return oneOf(
    "identities create claim-match",
    [
      { flag: "--audience", value: opts.audience, case: "audience" as const },
      { flag: "--audience-pattern", value: opts.audiencePattern, case: "audiencePattern" as const },
    ],
    false,
  );
}

function claimMatchRelationship(opts: ClaimMatchFlags & { claim?: string[]; claimPattern?: string[] }): Relationship {
  return claimMatch({
    iss: issuerChoice(opts, true),
    sub: subjectChoice(opts, true),
    aud: audienceChoice(opts),
    claims: keyValues("--claim", opts.claim),
    claimPatterns: keyValues("--claim-pattern", opts.claimPattern, true),
  });
}

interface StaticFlags {
  issuer?: string;
  subject?: string;
  issuerKeys?: string;
  expiration?: string;
}

async function staticRelationship(opts: StaticFlags): Promise<Relationship> {
  requireFlags("identities create static", {
    "--issuer": opts.issuer,
    "--subject": opts.subject,
    "--issuer-keys": opts.issuerKeys,
  });
  const expiration = given(opts.expiration) ? parseExpiration(opts.expiration) : undefined;
  return {
    case: "staticKeys",
    value: create(Identity_StaticKeysSchema, {
      issuer: opts.issuer,
      subject: opts.subject,
      issuerKeys: await readIssuerKeys(opts.issuerKeys!),
      expirationTime: expiration && timestampFromDate(expiration),
    }),
  };
}

interface AwsFlags {
  awsAccount?: string;
  awsArn?: string;
  awsArnPattern?: string;
  awsUserId?: string;
  awsUserIdPattern?: string;
}

function arnChoice(opts: AwsFlags, required: boolean) {
  checkPattern("--aws-arn-pattern", opts.awsArnPattern);
  return oneOf(
    "identities create aws",
    [
      { flag: "--aws-arn", value: opts.awsArn, case: "arn" as const },
      { flag: "--aws-arn-pattern", value: opts.awsArnPattern, case: "arnPattern" as const },
    ],
    required,
  );
}

function userIdChoice(opts: AwsFlags) {
  checkPattern("--aws-user-id-pattern", opts.awsUserIdPattern);
  return oneOf(
    "identities create aws",
    [
      { flag: "--aws-user-id", value: opts.awsUserId, case: "userId" as const },
      { flag: "--aws-user-id-pattern", value: opts.awsUserIdPattern, case: "userIdPattern" as const },
    ],
    false,
  );
}

function awsRelationship(opts: AwsFlags): Relationship {
  requireFlags("identities create aws", { "--aws-account": opts.awsAccount });
  if (!/^\d{12}$/.test(opts.awsAccount!))
    throw new UsageError(`--aws-account takes a 12-digit AWS account id, got ${JSON.stringify(opts.awsAccount)}`);
  return {
    case: "awsIdentity",
    value: create(Identity_AWSIdentitySchema, {
      awsAccount: opts.awsAccount,
      awsArn: arnChoice(opts, true),
      awsUserId: userIdChoice(opts),
    }),
  };
}

interface CreateFlags {
  description?: string;
  role?: string[];
}

/** `identities create <kind> <name>`: the kind's relationship from its flags, then the identity, then its role bindings. */
function createKind<O>(
  createGroup: Command,
  kind: string,
  spec: { description: string; examples: string[] },
  flags: (cmd: Command) => Command,
  relationship: (opts: O) => Relationship | Promise<Relationship>,
): void {
  const cmd = clientCommand(createGroup, `${kind} <name>`, { ...spec, parent: true })
    .option("--description <text>", "what it is for")
    .option("--role <role>", "bind it to this role (name or uid) in --parent (repeatable)", repeatable);
  run<O & CreateFlags>(flags(cmd), async ({ session, print, opts }, name: string) => {
    const wanted = await relationship(opts);
    const parent = await parentUid(session, `identities create ${kind}`);
    const roles: Role[] = [];
    for (const ref of new Set(opts.role ?? [])) roles.push(await resolveRole(session, ref, parent));
    const identity = await session.call(() =>
      session.client(IdentitiesService).createIdentity({
        parent,
        identity: create(IdentitySchema, { name, description: opts.description ?? "", relationship: wanted }),
      }),
    );
    let bound: RoleBinding[] = [];
    if (roles.length) {
      try {
        const res = await session.call(() =>
          session.client(RoleBindingsService).batchCreateRoleBindings({
            parent,
            requests: roles.map((role) => ({ roleBinding: { identityUid: identity.uid, roleUid: role.uid } })),
          }),
        );
        bound = res.roleBindings;
      } catch (err) {
        throw new CliError(
          `created the identity ${identity.name} (${identity.uid}), but could not bind its roles: ${(err as Error).message}`,
        );
      }
    }
    print.one(identityView, { identity, roles: bound.map((b) => b.role?.name ?? b.roleUid).sort() });
  });
}

function registerCreate(identities: Command): void {
  const createGroup = examples(
    identities
      .command("create")
      .description("create an identity a workload can assume: github, gitlab, claim-match, static or aws"),
    [
      "bulwark iam identities create github ci --github-repo acme/app --role viewer",
      "bulwark iam identities create static deployer --issuer https://deployer.example.com --subject deployer --issuer-keys jwks.json",
    ],
  );

  createKind<GithubFlags>(
    createGroup,
    "github",
    {
      description: "an identity for GitHub Actions workflows of one repository (any ref, or one)",
      examples: [
        "bulwark iam identities create github ci --github-repo acme/app --role viewer --parent <group uid>",
        "bulwark iam identities create github release --github-repo acme/app --github-ref refs/heads/main --role registry.push",
      ],
    },
    (cmd) =>
      cmd
        .option("--github-repo <owner/repo>", "the repository whose workflows may assume it (required)")
        .option(
          "--github-ref <ref>",
          "only workflows on this ref, e.g. refs/heads/main (default: any ref; jobs in an environment or on a pull request have other subjects: use claim-match for those)",
        )
        .option("--github-audience <aud>", "the audience the workflow's token must carry"),
    githubRelationship,
  );

  createKind<GitlabFlags>(
    createGroup,
    "gitlab",
    {
      description: "an identity for GitLab CI pipelines of one project (any ref, or one)",
      examples: [
        "bulwark iam identities create gitlab ci --gitlab-project acme/app --gitlab-ref main --role viewer",
        "bulwark iam identities create gitlab tags --gitlab-project acme/app --gitlab-ref-type tag --gitlab-issuer https://gitlab.acme.dev",
      ],
    },
    (cmd) =>
      cmd
        .option("--gitlab-project <group/project>", "the project whose pipelines may assume it (required)")
        .option("--gitlab-ref <ref>", "only pipelines on this branch or tag (default: any)")
        .addOption(
          new Option(
            "--gitlab-ref-type <type>",
            "branch or tag (default: branch with --gitlab-ref, else either)",
          ).choices(["branch", "tag"]),
        )
        .option("--gitlab-issuer <url>", `a self-hosted GitLab's URL (default ${GITLAB_ISSUER})`)
        .option("--gitlab-audience <aud>", "the audience the pipeline's token must carry"),
    gitlabRelationship,
  );

  createKind<ClaimMatchFlags & { claim?: string[]; claimPattern?: string[] }>(
    createGroup,
    "claim-match",
    {
      description: "an identity for any OIDC token whose claims match",
      examples: [
        "bulwark iam identities create claim-match build --identity-issuer https://issuer.example.com --subject build-bot",
        "bulwark iam identities create claim-match jobs --identity-issuer-pattern 'https://.*\\.example\\.com' --subject-pattern 'job-.*' --claim env=prod",
      ],
    },
    (cmd) =>
      cmd
        .option("--identity-issuer <url>", "the token's issuer, exactly")
        .option("--identity-issuer-pattern <regex>", "a pattern the issuer must match whole")
        .option("--subject <sub>", "the token's subject, exactly")
        .option("--subject-pattern <regex>", "a pattern the subject must match whole")
        .option("--audience <aud>", "the token's audience, exactly")
        .option("--audience-pattern <regex>", "a pattern the audience must match whole")
        .option("--claim <key=value>", "another claim the token must carry (repeatable)", repeatable)
        .option("--claim-pattern <key=regex>", "another claim, matched by a pattern (repeatable)", repeatable),
    claimMatchRelationship,
  );

  createKind<StaticFlags>(
    createGroup,
    "static",
    {
      description: "an identity for tokens signed by keys you hold (a JWKS), until an expiration",
      examples: [
        "bulwark iam identities create static deployer --issuer https://deployer.example.com --subject deployer --issuer-keys jwks.json --expiration 720h",
      ],
    },
    (cmd) =>
      cmd
        .option("--issuer <url>", "the issuer its tokens carry (required)")
        .option("--subject <sub>", "the subject its tokens carry (required)")
        .option("--issuer-keys <jwks|path>", "the public keys (a JWKS), or a file holding them (required)")
        .option(
          "--expiration <time|duration>",
          "when it stops working: an RFC 3339 time or a duration from now (720h)",
        ),
    staticRelationship,
  );

  createKind<AwsFlags>(
    createGroup,
    "aws",
    {
      description: "an identity for an AWS principal (signed GetCallerIdentity requests)",
      examples: [
        "bulwark iam identities create aws lambda --aws-account 123456789012 --aws-arn arn:aws:sts::123456789012:assumed-role/app/fn",
        "bulwark iam identities create aws roles --aws-account 123456789012 --aws-arn-pattern 'arn:aws:iam::123456789012:role/.*'",
      ],
    },
    (cmd) =>
      cmd
        .option("--aws-account <id>", "the 12-digit AWS account (required)")
        .option("--aws-arn <arn>", "the principal's ARN, exactly")
        .option("--aws-arn-pattern <regex>", "a pattern the ARN must match whole")
        .option("--aws-user-id <id>", "the principal's user id, exactly")
        .option("--aws-user-id-pattern <regex>", "a pattern the user id must match whole"),
    awsRelationship,
  );
}

// ---- identities update ----

interface IdentityUpdateFlags extends ClaimMatchFlags, AwsFlags {
  name?: string;
  description?: string;
  issuerKeys?: string;
  expiration?: string;
}

/** The field-mask path of a oneof member, by its case. */
const MEMBER_PATH: Record<string, string> = {
  issuer: "issuer",
  issuerPattern: "issuer_pattern",
  subject: "subject",
  subjectPattern: "subject_pattern",
  audience: "audience",
  audiencePattern: "audience_pattern",
  arn: "arn",
  arnPattern: "arn_pattern",
  userId: "user_id",
  userIdPattern: "user_id_pattern",
};

const RELATIONSHIP_FLAGS = {
  claimMatch: {
    kinds: "claim-match identities (github and gitlab ones too)",
    flags: {
      identityIssuer: "--identity-issuer",
      identityIssuerPattern: "--identity-issuer-pattern",
      subject: "--subject",
      subjectPattern: "--subject-pattern",
      audience: "--audience",
      audiencePattern: "--audience-pattern",
    },
  },
  staticKeys: { kinds: "static identities", flags: { issuerKeys: "--issuer-keys", expiration: "--expiration" } },
  awsIdentity: {
    kinds: "aws identities",
    flags: {
      awsArn: "--aws-arn",
      awsArnPattern: "--aws-arn-pattern",
      awsUserId: "--aws-user-id",
      awsUserIdPattern: "--aws-user-id-pattern",
    },
  },
} as const;

type RelationshipCase = keyof typeof RELATIONSHIP_FLAGS;

/** Which kind of relationship the update's flags change (at most one kind), with the flags given. */
function relationshipFlagsGiven(opts: IdentityUpdateFlags): { kind: RelationshipCase; flags: string[] } | undefined {
  const found = (Object.keys(RELATIONSHIP_FLAGS) as RelationshipCase[])
    .map((kind) => ({
      kind,
      flags: Object.entries(RELATIONSHIP_FLAGS[kind].flags)
        .filter(([key]) => given(opts[key as keyof IdentityUpdateFlags]))
        .map(([, flag]) => flag),
    }))
    .filter((k) => k.flags.length > 0);
  if (found.length > 1)
    throw new UsageError(`${found.map((k) => k.flags.join(", ")).join(" and ")} are for different kinds of identity`);
  return found[0];
}

/** The identity with the relationship fields the flags give, and their field-mask paths. */
async function relationshipUpdate(
  opts: IdentityUpdateFlags,
  current: Identity,
): Promise<{ relationship: Relationship; paths: string[] } | undefined> {
  const asked = relationshipFlagsGiven(opts);
  if (!asked) return undefined;
  const r = current.relationship;
  if (r.case !== asked.kind)
    throw new UsageError(
      `${current.name} is a ${identityType(current)} identity: ${asked.flags.join(", ")} ${asked.flags.length > 1 ? "are" : "is"} for ${RELATIONSHIP_FLAGS[asked.kind].kinds}`,
    );
  const paths: string[] = [];
  const set = <C extends string>(prefix: string, choice: { case: C | undefined }): boolean => {
    if (choice.case) paths.push(`${prefix}.${MEMBER_PATH[choice.case]}`);
    return choice.case !== undefined;
  };
  if (r.case === "claimMatch") {
    const value = clone(Identity_ClaimMatchSchema, r.value);
    const iss = issuerChoice(opts, false);
    const sub = subjectChoice(opts, false);
    const aud = audienceChoice(opts);
    if (set("claim_match", iss)) value.iss = iss;
    if (set("claim_match", sub)) value.sub = sub;
    if (set("claim_match", aud)) value.aud = aud;
    return { relationship: { case: "claimMatch", value }, paths };
  }
  if (r.case === "staticKeys") {
    const value = clone(Identity_StaticKeysSchema, r.value);
    if (given(opts.issuerKeys)) {
      value.issuerKeys = await readIssuerKeys(opts.issuerKeys);
      paths.push("static_keys.issuer_keys");
    }
    if (given(opts.expiration)) {
      value.expirationTime = timestampFromDate(parseExpiration(opts.expiration));
      paths.push("static_keys.expiration_time");
    }
    return { relationship: { case: "staticKeys", value }, paths };
  }
  if (r.case === "awsIdentity") {
    const value = clone(Identity_AWSIdentitySchema, r.value);
    const arn = arnChoice(opts, false);
    const userId = userIdChoice(opts);
    if (set("aws_identity", arn)) value.awsArn = arn;
    if (set("aws_identity", userId)) value.awsUserId = userId;
    return { relationship: { case: "awsIdentity", value }, paths };
  }
  return undefined;
}

// ---- commands ----

export function registerIdentities(iam: Command): void {
  const identities = examples(
    iam
      .command("identities")
      .alias("identity")
      .description("identities: who may act (workloads assuming one, and people)"),
    ["bulwark iam identities list --parent <group uid>", "bulwark iam identities create github --help"],
  );

  registerCreate(identities);

  run<{ name?: string; type?: IdentityType }>(
    clientCommand(identities, "list", {
      description: "list the identities under --parent (all levels), or all you can see, with their roles",
      examples: [
        "bulwark iam identities list --parent <group uid>",
        "bulwark iam identities list --type github -o wide",
        "bulwark iam identities list --name ci -o id",
      ],
      parent: true,
      list: true,
    })
      .option("--name <name>", "only identities with this name")
      .addOption(new Option("--type <type>", "only identities of this type").choices(IDENTITY_TYPES)),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      // github, gitlab and claim-match are one type to the server, and people none: those are sorted out here.
      const serverFiltersAll = opts.type === undefined || ["static", "aws", "service-principal"].includes(opts.type);
      let found = await listIdentityPages(
        session,
        { descendantsOf: parent, name: opts.name, type: opts.type && SERVER_TYPE[opts.type] },
        serverFiltersAll ? opts.limit : undefined,
      );
      if (opts.type) found = found.filter((i) => identityType(i) === opts.type);
      if (opts.limit) found = found.slice(0, opts.limit);
      print.list(identityView, await withRoles(session, print.format, found, { descendantsOf: parent }));
    },
  );

  run(
    clientCommand(identities, "describe <identity>", {
      description: "show one identity (by uid or name) and its roles",
      examples: ["bulwark iam identities describe ci -o wide", "bulwark iam identities describe <uid> -o json"],
    }),
    async ({ session, print }, ref: string) => {
      print.one(identityView, await describeIdentity(session, print.format, await resolveIdentity(session, ref)));
    },
  );

  run<IdentityUpdateFlags>(
    clientCommand(identities, "update <identity>", {
      description: "rename an identity, change its description, or change what may assume it",
      examples: [
        'bulwark iam identities update <uid> --name deployer --description "deploys the app"',
        "bulwark iam identities update ci --subject-pattern 'repo:acme/app:ref:refs/tags/.*'",
        "bulwark iam identities update <uid> --expiration 720h",
      ],
    })
      .option("--name <name>", "its new name")
      .option("--description <text>", "its new description")
      .option("--identity-issuer <url>", "claim-match: the token's issuer, exactly")
      .option("--identity-issuer-pattern <regex>", "claim-match: a pattern the issuer must match whole")
      .option("--subject <sub>", "claim-match: the token's subject, exactly")
      .option("--subject-pattern <regex>", "claim-match: a pattern the subject must match whole")
      .option("--audience <aud>", "claim-match: the token's audience, exactly")
      .option("--audience-pattern <regex>", "claim-match: a pattern the audience must match whole")
      .option("--issuer-keys <jwks|path>", "static: new public keys (a JWKS), or a file holding them")
      .option("--expiration <time|duration>", "static: a new expiration (RFC 3339 time or a duration from now)")
      .option("--aws-arn <arn>", "aws: the principal's ARN, exactly")
      .option("--aws-arn-pattern <regex>", "aws: a pattern the ARN must match whole")
      .option("--aws-user-id <id>", "aws: the principal's user id, exactly")
      .option("--aws-user-id-pattern <regex>", "aws: a pattern the user id must match whole"),
    async ({ session, print, opts }, ref: string) => {
      const relationshipAsked = relationshipFlagsGiven(opts);
      if (opts.name === undefined && opts.description === undefined && !relationshipAsked)
        throw new UsageError("nothing to change: pass --name, --description, or what may assume it (see --help)");
      const current = await resolveIdentity(session, ref);
      const relationship = await relationshipUpdate(opts, current);
      const paths = [
        ...(opts.name !== undefined ? ["name"] : []),
        ...(opts.description !== undefined ? ["description"] : []),
        ...(relationship?.paths ?? []),
      ];
      const identity = await session.call(() =>
        session.client(IdentitiesService).updateIdentity({
          identity: create(IdentitySchema, {
            uid: current.uid,
            name: opts.name ?? current.name,
            description: opts.description ?? current.description,
            relationship: relationship?.relationship ?? current.relationship,
          }),
          updateMask: create(FieldMaskSchema, { paths }),
        }),
      );
      print.one(identityView, await describeIdentity(session, print.format, identity));
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(identities, "delete <identity>", {
      description: "delete an identity (by uid or name) and its role bindings",
      examples: ["bulwark iam identities delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const identity = await resolveIdentity(session, ref);
      const bound = await listBindings(session, { identity: identity.uid });
      const also = bound.length ? ` and its ${bound.length} role binding${bound.length > 1 ? "s" : ""}` : "";
      await confirm(io, `Delete the identity ${identity.name} (${identity.uid})${also}?`, opts.yes);
      await deleteIdentityWithBindings(session, identity.uid, bound);
      print.done(`deleted identity ${identity.name} (${identity.uid})`, { id: identity.uid, json: {} });
    },
  );

  registerRoleBindings(iam);
}

function describeBinding(b: RoleBinding): string {
  return `the role binding ${b.uid} (${b.identity?.name ?? b.identityUid} as ${b.role?.name ?? b.roleUid} in ${b.group?.name ?? parentOf(b.uid)})`;
}

function registerRoleBindings(iam: Command): void {
  const bindings = examples(
    iam
      .command("role-bindings")
      .alias("rolebindings")
      .alias("role-binding")
      .description("role bindings: an identity holds a role in a group (and every group under it)"),
    [
      "bulwark iam role-bindings list --parent <group uid>",
      "bulwark iam role-bindings create --identity ci --role viewer",
    ],
  );
  const client = (session: Session) => session.client(RoleBindingsService);

  run<{ identity?: string; role?: string }>(
    clientCommand(bindings, "list", {
      description: "list the role bindings under --parent (all levels), or all you can see",
      examples: [
        "bulwark iam role-bindings list --parent <group uid>",
        "bulwark iam role-bindings list --identity ci --role viewer -o wide",
      ],
      parent: true,
      list: true,
    })
      .option("--identity <identity>", "only bindings of this identity (uid or name)")
      .option("--role <role>", "only bindings to this role (uid or name)"),
    async ({ session, print, opts }) => {
      // A uid filters on the server; a name is matched here, against the names the bindings carry.
      const byName = (ref: string | undefined) => (given(ref) && !isValidUidp(ref) ? ref : undefined);
      const byUid = (ref: string | undefined) => (given(ref) && isValidUidp(ref) ? ref : undefined);
      const identityName = byName(opts.identity);
      const roleName = byName(opts.role);
      const filteredHere = identityName !== undefined || roleName !== undefined;
      let found = await listBindings(
        session,
        { descendantsOf: await parentUid(session), identity: byUid(opts.identity), role: byUid(opts.role) },
        filteredHere ? undefined : opts.limit,
      );
      if (identityName !== undefined) found = found.filter((b) => b.identity?.name === identityName);
      if (roleName !== undefined) found = found.filter((b) => b.role?.name === roleName);
      if (opts.limit) found = found.slice(0, opts.limit);
      print.list(bindingView, found);
    },
  );

  run(
    clientCommand(bindings, "describe <binding>", {
      description: "show one role binding",
      examples: ["bulwark iam role-bindings describe <uid> -o json"],
    }),
    async ({ session, print }, uid: string) => {
      print.one(bindingView, await session.call(() => client(session).getRoleBinding({ uid })));
    },
  );

  run<{ identity?: string; role?: string }>(
    clientCommand(bindings, "create", {
      description: "let an identity hold a role in --parent (and every group under it)",
      examples: [
        "bulwark iam role-bindings create --identity <identity uid> --role viewer --parent <group uid>",
        "bulwark iam role-bindings create --identity ci --role registry.push",
      ],
      parent: true,
    })
      .option("--identity <identity>", "the identity (uid or name; required)")
      .option("--role <role>", "the role (name or uid; required)"),
    async ({ session, print, opts }) => {
      requireFlags("role-bindings create", { "--identity": opts.identity, "--role": opts.role });
      const parent = await parentUid(session, "role-bindings create");
      const identity = isValidUidp(opts.identity!)
        ? opts.identity!
        : (await resolveIdentity(session, opts.identity!)).uid;
      const role = await resolveRole(session, opts.role!, parent);
      const binding = await session.call(() =>
        client(session).createRoleBinding({ parent, roleBinding: { identityUid: identity, roleUid: role.uid } }),
      );
      print.one(bindingView, binding);
    },
  );

  run<{ role?: string }>(
    clientCommand(bindings, "update <binding>", {
      description: "give a role binding another role",
      examples: ["bulwark iam role-bindings update <uid> --role editor"],
    }).option("--role <role>", "the new role (name or uid; required)"),
    async ({ session, print, opts }, uid: string) => {
      requireFlags("role-bindings update", { "--role": opts.role });
      const current = await session.call(() => client(session).getRoleBinding({ uid }));
      const role = await resolveRole(session, opts.role!, current.group?.uid || parentOf(current.uid));
      const binding = await session.call(() =>
        client(session).updateRoleBinding({
          roleBinding: { uid: current.uid, identityUid: current.identityUid, roleUid: role.uid },
          updateMask: create(FieldMaskSchema, { paths: ["role_uid"] }),
        }),
      );
      print.one(bindingView, binding);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(bindings, "delete <binding>", {
      description: "delete a role binding: the identity no longer holds the role there",
      examples: ["bulwark iam role-bindings delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, uid: string) => {
      const binding = await session.call(() => client(session).getRoleBinding({ uid }));
      await confirm(io, `Delete ${describeBinding(binding)}?`, opts.yes);
      await session.call(() => client(session).deleteRoleBinding({ uid }));
      print.done(`deleted ${describeBinding(binding)}`, { id: uid, json: {} });
    },
  );
}
