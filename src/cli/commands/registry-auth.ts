// `bulwark auth configure-docker` and `bulwark auth pull-token`: credentials for the registry.
// configure-docker points docker at the docker-credential-bulwark helper (docker-credential.ts),
// which hands docker a short-lived registry token each time. A pull token is a long-lived
// credential for machines that cannot run the CLI: a static-keys identity whose only key signed
// the password, bound to the built-in registry.pull role; deleting the identity revokes it.
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import {
  IdentitiesService,
  IdentitySchema,
  RelationshipType,
  type Identity,
} from "../../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { PACKAGE_ROOT } from "../../core/package-files.js";
import { clientCommand, run } from "../command.js";
import { confirm } from "../confirm.js";
import { homeDir } from "../credentials.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, time } from "../output.js";
import type { Session } from "../session.js";
import { durationMillis } from "../durations.js";
import { listGroups, parentUid, resolveIdentity } from "../resolve.js";
import { deleteIdentityWithBindings } from "./identities.js";

/** The helper docker runs is `docker-credential-<this>`; the package installs it next to `bulwark`. */
export const CREDENTIAL_HELPER = "bulwark";
const BIN_DIR = join(PACKAGE_ROOT, "bin");

/**
 * Pull tokens' issuers: this prefix and the token's id. `.invalid` never resolves (RFC 2606), so
 * no one can serve keys for it: the identity's own JWKS is the only key that verifies.
 */
export const PULL_TOKEN_ISSUER_PREFIX = "https://pull-token.bulwark.invalid/";
export const PULL_TOKEN_SUBJECT_PREFIX = "pull-token-";
const PULL_ROLE = "registry.pull";

const HOUR_MS = 3600 * 1000;
const DEFAULT_TTL = "720h";
const MAX_TTL_MS = 8760 * HOUR_MS;

/** --ttl in milliseconds: a duration from 1m to 8760h. */
export function parseTtl(value: string): number {
  const ms = durationMillis(value);
  if (ms === undefined)
    throw new UsageError(`--ttl must be a duration like 720h, 24h or 90m (got ${JSON.stringify(value)})`);
  if (ms < 60_000) throw new UsageError(`--ttl must be at least 1m (got ${value})`);
  if (ms > MAX_TTL_MS) throw new UsageError(`--ttl must be at most 8760h, a year (got ${value})`);
  return ms;
}

export function isPullToken(identity: Identity): boolean {
  const r = identity.relationship;
  return (
    r.case === "staticKeys" &&
    r.value.issuer.startsWith(PULL_TOKEN_ISSUER_PREFIX) &&
    r.value.subject.startsWith(PULL_TOKEN_SUBJECT_PREFIX)
  );
}

const expirationOf = (identity: Identity) =>
  identity.relationship.case === "staticKeys" ? identity.relationship.value.expirationTime : undefined;
const groupOf = (uid: string) => uid.slice(0, uid.lastIndexOf("/"));

/** Pull-token identities with the names of their groups, for the list. */
interface PullTokenRow {
  identity: Identity;
  groupName: string;
}

const pullTokenView = {
  columns: [
    { header: "ID", value: (r: PullTokenRow) => r.identity.uid },
    { header: "NAME", value: (r: PullTokenRow) => r.identity.name },
    { header: "EXPIRES", value: (r: PullTokenRow) => time(expirationOf(r.identity)) },
    { header: "GROUP", value: (r: PullTokenRow) => r.groupName },
    { header: "GROUP ID", value: (r: PullTokenRow) => groupOf(r.identity.uid), wide: true },
    {
      header: "REGISTRY",
      value: (r: PullTokenRow) =>
        r.identity.relationship.case === "staticKeys" ? r.identity.relationship.value.audiences.join(", ") : "",
      wide: true,
    },
    { header: "LAST USED", value: (r: PullTokenRow) => time(r.identity.lastSeenTime), wide: true },
  ],
  id: (r: PullTokenRow) => r.identity.uid,
  json: (r: PullTokenRow) => toJson(IdentitySchema, r.identity),
};

/** The built-in registry.pull role's uid, looked up by name (built-in roles are listed to everyone). */
async function pullRoleUid(session: Session): Promise<string> {
  const res = await session.call(() => session.client(RolesService).listRoles({ name: PULL_ROLE }));
  const role = res.roles.find((r) => r.name === PULL_ROLE && !r.uid.includes("/"));
  if (!role) throw new CliError(`the server has no built-in ${PULL_ROLE} role`);
  return role.uid;
}

interface PullToken {
  identity: Identity;
  registry: string;
  password: string;
  expiration: Date;
}

async function createPullToken(
  session: Session,
  parent: string,
  options: { name?: string; ttlMs: number },
): Promise<PullToken> {
  const registry = session.registryHost;
  const id = randomBytes(8).toString("hex");
  const issuer = PULL_TOKEN_ISSUER_PREFIX + id;
  const subject = PULL_TOKEN_SUBJECT_PREFIX + id;
  // Whole seconds, from one clock reading: the JWT's iat and exp and the identity's expiration agree.
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiration = new Date((issuedAt + Math.round(options.ttlMs / 1000)) * 1000);
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const jwk = { ...(await exportJWK(publicKey)), kid: id, alg: "RS256", use: "sig" };
  const roleUid = await pullRoleUid(session);
  const identities = session.client(IdentitiesService);
  const identity = await session.call(() =>
    identities.createIdentity({
      parent,
      identity: {
        name: options.name ?? subject,
        description: `pull token for ${registry}`,
        relationship: {
          case: "staticKeys",
          value: {
            issuer,
            subject,
            issuerKeys: JSON.stringify({ keys: [jwk] }),
            expirationTime: timestampFromDate(expiration),
            // The password's audience is the registry, not the token exchange's default (the issuer).
            audiences: [registry],
          },
        },
      },
    }),
  );
  try {
    await session.call(() =>
      session
        .client(RoleBindingsService)
        .createRoleBinding({ parent, roleBinding: { identityUid: identity.uid, roleUid } }),
    );
  } catch (err) {
    // An identity that cannot pull is no pull token; do not leave it behind.
    await identities.deleteIdentity({ uid: identity.uid }).catch(() => undefined);
    throw err;
  }
  const password = await new SignJWT({})
    .setProtectedHeader({ alg: "RS256", kid: id, typ: "JWT" })
    .setIssuer(issuer)
    .setSubject(subject)
    .setAudience(registry)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiration)
    .sign(privateKey);
  return { identity, registry, password, expiration };
}

/** Group names for a list's GROUP column, in one list call per page; a group the caller cannot read shows its uid. */
async function groupNames(session: Session, uids: string[]): Promise<Map<string, string>> {
  const wanted = [...new Set(uids)];
  const found = wanted.length ? await listGroups(session, { ids: wanted }) : [];
  return new Map(wanted.map((uid) => [uid, found.find((g) => g.uid === uid)?.name ?? uid]));
}

export function dockerConfigPath(env: NodeJS.ProcessEnv): string {
  return join(env.DOCKER_CONFIG || join(homeDir(env), ".docker"), "config.json");
}

/** How docker (and podman, skopeo: they read docker's config too) logs in to one registry. */
export type DockerLogin = { helper: string } | { username: string; password: string };

/**
 * Sets how docker logs in to `registry` in its config, keeping everything else in it: a
 * credential helper (credHelpers), or a fixed login (auths, as `docker login` writes it; the
 * registry's credHelpers entry goes, since docker would ask the helper first).
 */
/** Writes the login into docker's config; answers what the user should know about it (none: nothing). */
export async function configureDocker(path: string, registry: string, login: DockerLogin): Promise<string | undefined> {
  let config: Record<string, unknown> = {};
  let mode = 0o600;
  let text: string | undefined;
  try {
    text = await readFile(path, "utf8");
    mode = (await stat(path)).mode & 0o777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT")
      throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (text !== undefined && text.trim() !== "") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new CliError(`${path} is not valid JSON (${(err as Error).message}): fix it first`);
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new CliError(`${path} must hold a JSON object`);
    config = parsed as Record<string, unknown>;
  }
  const section = (key: string): Record<string, unknown> => {
    const value = config[key] ?? {};
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw new CliError(`${key} in ${path} must be a JSON object`);
    return { ...(value as Record<string, unknown>) };
  };
  const helpers = section("credHelpers");
  const auths = section("auths");
  let note: string | undefined;
  if ("helper" in login) {
    helpers[registry] = login.helper;
    config.credHelpers = helpers;
    // A login stored before (a pull token's password) would only linger: the helper answers now.
    if (registry in auths) {
      delete auths[registry];
      config.auths = auths;
    }
  } else {
    delete helpers[registry];
    if (config.credHelpers !== undefined) config.credHelpers = helpers;
    auths[registry] = { auth: Buffer.from(`${login.username}:${login.password}`).toString("base64") };
    config.auths = auths;
    // A fixed login is a password: the file is the user's alone from now on.
    mode &= 0o700;
    // docker asks a credential store for every registry without a helper, over `auths` (podman
    // and skopeo read `auths`): the login has to be stored in it by docker itself.
    if (typeof config.credsStore === "string" && config.credsStore !== "")
      note =
        `${path} names the credential store "${config.credsStore}", which docker asks instead of this ` +
        `login (podman and skopeo use it as written): for docker, also run ` +
        `\`docker login ${registry} -u ${login.username} --password-stdin\` with the password on its input`;
  }
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  // Written aside and renamed, so docker never reads half a file.
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(config, null, "\t") + "\n", { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
  return note;
}

const HELPER_PROGRAM = `docker-credential-${CREDENTIAL_HELPER}`;
/** The first line after the shebang of the wrapper configure-docker writes: how it knows its own. */
const WRAPPER_MARK = "# written by `bulwark auth configure-docker`";

/** The absolute directories of PATH, in order (docker and podman refuse helpers found through relative ones). */
function pathDirs(env: NodeJS.ProcessEnv): string[] {
  return (env.PATH ?? "").split(delimiter).filter((d) => isAbsolute(d));
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The helper as docker runs it: an executable named docker-credential-bulwark (no `.js`) that
 * runs this installation's helper with this Node, whatever PATH holds when docker runs it.
 */
function wrapperScript(): string {
  return (
    `#!/bin/sh\n${WRAPPER_MARK}: docker's credential helper for bulwark's registry.\n` +
    `exec ${shellQuote(process.execPath)} ${shellQuote(join(BIN_DIR, `${HELPER_PROGRAM}.js`))} "$@"\n`
  );
}

interface HelperInstall {
  /** where the helper is (undefined: nowhere docker finds it) */
  path?: string;
  /** written now (or already this installation's) rather than found */
  written: boolean;
  /** what the user must still do, when docker cannot find it yet */
  todo?: string;
}

/**
 * Puts docker-credential-bulwark where docker finds it: into --bin-dir, else the first of
 * ~/.local/bin and ~/bin that is on PATH (created when missing). A helper of ours already there is
 * rewritten (this installation may have moved); one that is not ours is left alone.
 */
async function installHelper(env: NodeJS.ProcessEnv, binDir: string | undefined): Promise<HelperInstall> {
  const dirs = pathDirs(env);
  const home = homeDir(env);
  const candidates = binDir !== undefined ? [resolve(binDir)] : [join(home, ".local", "bin"), join(home, "bin")];
  const target = candidates.find((d) => binDir !== undefined || dirs.includes(d));
  if (!target) {
    const found = await firstOnPath(HELPER_PROGRAM, env);
    if (found) return { path: found, written: false };
    const dir = join(home, ".local", "bin");
    return {
      written: false,
      todo:
        `no directory for ${HELPER_PROGRAM} is on your PATH (looked for ~/.local/bin and ~/bin); run:\n` +
        `  bulwark auth configure-docker --bin-dir ${shellQuote(dir)}\n  export PATH=${shellQuote(dir)}:"$PATH"   # and add this line to your shell's profile`,
    };
  }
  const path = join(target, HELPER_PROGRAM);
  const existing = await readFile(path, "utf8").catch(() => undefined);
  if (existing !== undefined && !existing.includes(WRAPPER_MARK))
    throw new CliError(
      `${path} exists and was not written by bulwark: remove it, or pass --bin-dir <another directory on PATH>`,
    );
  try {
    await mkdir(target, { recursive: true, mode: 0o755 });
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, wrapperScript(), { mode: 0o755 });
    await chmod(tmp, 0o755);
    await rename(tmp, path);
  } catch (err) {
    throw new CliError(
      `cannot write ${path}: ${(err as Error).message}; pass --bin-dir <a writable directory on your PATH>`,
    );
  }
  const todo = dirs.includes(target)
    ? undefined
    : `${target} is not on your PATH: run \`export PATH=${shellQuote(target)}:"$PATH"\` (and add it to your shell's profile)`;
  return { path, written: true, todo };
}

async function firstOnPath(program: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of pathDirs(env)) if (await isExecutable(join(dir, program))) return join(dir, program);
  return undefined;
}

export function registerRegistryAuth(auth: Command): void {
  run<{ registry?: string; binDir?: string; pullToken?: boolean; ttl?: string; name?: string; parent?: string }>(
    clientCommand(auth, "configure-docker", {
      description:
        "let docker, podman and skopeo log in to the registry: installs docker-credential-bulwark on your PATH " +
        "(~/.local/bin or ~/bin, or --bin-dir) and names it in credHelpers of $DOCKER_CONFIG/config.json " +
        "(default ~/.docker, which podman and skopeo read too); with --pull-token, a pull token's login instead",
      examples: [
        "bulwark auth configure-docker",
        "bulwark auth configure-docker --bin-dir /usr/local/bin --registry registry.example.com",
        "bulwark auth configure-docker --pull-token --parent acme --ttl 24h   # machines that cannot run bulwark",
      ],
      parent: true,
    })
      .option("--registry <host>", "the registry's host[:port] [env BULWARK_REGISTRY; default: the API's]")
      .option("--bin-dir <dir>", "install docker-credential-bulwark here (default: ~/.local/bin or ~/bin, if on PATH)")
      .option("--pull-token", "create a pull token for --parent and store its login (no helper: nothing to install)")
      .option("--ttl <duration>", `with --pull-token: how long it is valid, at most 8760h (default ${DEFAULT_TTL})`)
      .option("--name <name>", "with --pull-token: the pull token identity's name"),
    async ({ session, print, opts, io }) => {
      const registry = session.registryHost;
      const path = dockerConfigPath(io.env);
      if (!opts.pullToken) {
        const stray = [
          ["--ttl", opts.ttl],
          ["--name", opts.name],
          ["--parent", opts.parent],
        ].filter(([, v]) => v !== undefined);
        if (stray.length) throw new UsageError(`${stray.map(([f]) => f).join(", ")}: only with --pull-token`);
        const helper = await installHelper(io.env, opts.binDir);
        await configureDocker(path, registry, { helper: CREDENTIAL_HELPER });
        const lines = [
          helper.written
            ? `installed ${helper.path}`
            : helper.path
              ? `using ${helper.path}`
              : `${HELPER_PROGRAM} is not installed`,
          `docker, podman and skopeo now ask ${HELPER_PROGRAM} for ${registry} credentials (set in ${path})`,
          ...(helper.todo ? [helper.todo] : []),
        ];
        if (helper.todo && (print.format === "json" || print.format === "id" || print.format === "terse"))
          io.stderr.write(helper.todo + "\n");
        print.done(lines.join("\n"), {
          id: registry,
          json: { registry, configFile: path, credHelper: CREDENTIAL_HELPER, helper: helper.path ?? null },
        });
        return;
      }
      if (opts.binDir !== undefined) throw new UsageError("--bin-dir: a pull token needs no helper");
      const ttlMs = parseTtl(opts.ttl ?? DEFAULT_TTL);
      const parent = await parentUid(session, "auth configure-docker --pull-token");
      const token = await createPullToken(session, parent, { name: opts.name, ttlMs });
      const username = token.identity.uid;
      const note = await configureDocker(path, token.registry, { username, password: token.password });
      if (note) io.stderr.write(note + "\n");
      const expires = time(timestampFromDate(token.expiration));
      print.done(
        `docker, podman and skopeo now log in to ${token.registry} as the pull token ${username} (set in ${path}); ` +
          `it expires ${expires}; revoke it with \`bulwark auth pull-token delete ${username}\``,
        {
          id: username,
          json: { registry: token.registry, configFile: path, identity: username, expiration: expires },
        },
      );
    },
  );

  const pullToken = auth
    .command("pull-token")
    .description(
      "long-lived registry pull credentials for machines; revoking one deletes its identity " +
        "(`bulwark iam identities delete <id>`, or `bulwark auth pull-token delete <id>`)",
    );

  run<{ name?: string; ttl: string; registry?: string }>(
    clientCommand(pullToken, "create", {
      description:
        "create a pull token for --parent and print its docker login command; to revoke it, delete its identity: " +
        "`bulwark iam identities delete <id>` (or `bulwark auth pull-token delete <id>`)",
      examples: [
        "bulwark auth pull-token create --parent <org uid>",
        "bulwark auth pull-token create --parent <org uid> --name ci --ttl 24h -o json",
      ],
      parent: true,
    })
      .option("--name <name>", "the pull token identity's name (default: pull-token-<id>)")
      .option("--ttl <duration>", "how long it is valid, at most 8760h", DEFAULT_TTL)
      .option("--registry <host>", "the registry it is for [env BULWARK_REGISTRY; default: the API's host]"),
    async ({ session, print, opts, io }) => {
      const ttlMs = parseTtl(opts.ttl);
      const parent = await parentUid(session, "auth pull-token create");
      const token = await createPullToken(session, parent, { name: opts.name, ttlMs });
      const username = token.identity.uid;
      const expires = time(timestampFromDate(token.expiration));
      const command = `docker login ${token.registry} --username ${username} --password ${token.password}`;
      if (print.format === "table" || print.format === "wide")
        io.stderr.write(
          `Pull token ${username} expires ${expires}; ` +
            `revoke it with \`bulwark iam identities delete ${username}\`. To use it, run:\n`,
        );
      // -o id/terse print the identity for scripts; the password exists only now, so it goes to stderr.
      if (print.format === "id" || print.format === "terse")
        io.stderr.write(`password (shown only this once): ${token.password}\n`);
      print.done(command, {
        id: username,
        json: {
          identity: username,
          name: token.identity.name,
          registry: token.registry,
          username,
          password: token.password,
          expiration: expires,
          command,
        },
      });
    },
  );

  run(
    clientCommand(pullToken, "list", {
      description: "list the pull tokens under --parent (all levels; default: all you can see)",
      examples: ["bulwark auth pull-token list --parent <org uid>", "bulwark auth pull-token list -o json"],
      parent: true,
      list: true,
    }),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const client = session.client(IdentitiesService);
      const statics = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listIdentities({
            uidp: parent ? { descendantsOf: parent } : undefined,
            relationshipType: RelationshipType.STATIC,
            pageSize,
            pageToken,
          }),
        );
        return { items: res.identities, nextPageToken: res.nextPageToken };
      });
      const tokens = statics.filter(isPullToken);
      const shown = opts.limit ? tokens.slice(0, opts.limit) : tokens;
      const names =
        print.format === "table" || print.format === "wide" || print.format === "terse"
          ? await groupNames(
              session,
              shown.map((i) => groupOf(i.uid)),
            )
          : new Map<string, string>();
      print.list(
        pullTokenView,
        shown.map((identity) => ({ identity, groupName: names.get(groupOf(identity.uid)) ?? groupOf(identity.uid) })),
      );
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(pullToken, "delete <pull-token>", {
      description: "revoke a pull token (its identity's uid or name): delete its identity and role binding",
      examples: ["bulwark auth pull-token delete <identity uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const identity = await resolveIdentity(session, ref);
      const uid = identity.uid;
      if (!isPullToken(identity))
        throw new UsageError(`${identity.name} (${uid}) is not a pull token: use \`bulwark iam identities delete\``);
      await confirm(io, `Revoke the pull token ${identity.name} (${uid})?`, opts.yes);
      await deleteIdentityWithBindings(session, identity.uid);
      print.done(`revoked pull token ${identity.name} (${uid})`, { id: uid, json: {} });
    },
  );
}
