// A group's links to the outside: `bulwark iam identity-providers` (OIDC providers people sign in
// through) and `bulwark iam account-associations` (the cloud accounts a group owns; one
// association per group, its uid is the group's uid).
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { clone, create, toJson } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Option, type Command } from "commander";
import {
  AccountAssociationSchema,
  AccountAssociation_AzureSchema,
  AccountAssociation_ChainguardSchema,
  AccountAssociation_GitHubAppInstallationsSchema,
  AccountAssociation_GitHubInstallationSchema,
  AccountAssociation_GitHubSchema,
  AccountAssociation_GoogleSchema,
  AccountAssociation_AmazonSchema,
  AccountAssociationsService,
  AccountProviderType,
  CheckAccountAssociationResponseSchema,
  CheckStatus,
  type AccountAssociation,
  type CheckAccountAssociationResponse,
} from "../../gen/chainguard/platform/iam/v2beta1/account_associations_pb.js";
import {
  IdentityProviderSchema,
  IdentityProvider_OIDCSchema,
  IdentityProvider_OIDC_CorrelationRule,
  IdentityProvidersService,
  type IdentityProvider,
  type IdentityProvider_OIDC,
} from "../../gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { isValidUidp, parentOf } from "../../core/uidp.js";
import { clientCommand, commaList, repeatable, run } from "../command.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, messageView, time, type View } from "../output.js";
import type { Session } from "../session.js";
import { groupUid, parentUid, resolveGroup, resolveIdentityProvider, resolveRole } from "../resolve.js";

/** `key=value` pairs as a map; `what` names the flag in errors. */
function pairs(values: string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of values) {
    const eq = entry.indexOf("=");
    if (eq <= 0) throw new UsageError(`${what} takes <name>=<value>, not ${JSON.stringify(entry)}`);
    out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

/** The answer of a call, or undefined when the server says the thing does not exist. */
function orMissing<T>(call: Promise<T>): Promise<T | undefined> {
  return call.catch((err: unknown) => {
    if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
    throw err;
  });
}

// ---- identity providers ----

/**
 * Role names for display. A name is a nicety (the uid is what the API holds), so when roles
 * cannot be read the table shows uids rather than failing.
 */
async function roleNames(session: Session, uids: string[]): Promise<Map<string, string>> {
  const distinct = [...new Set(uids.filter(Boolean))];
  if (!distinct.length) return new Map();
  try {
    const res = await session.call(() =>
      session.client(RolesService).listRoles({ uidp: { ids: distinct }, pageSize: distinct.length }),
    );
    return new Map(res.roles.map((r) => [r.uid, r.name]));
  } catch {
    return new Map();
  }
}

const CORRELATION_RULES: Record<string, IdentityProvider_OIDC_CorrelationRule> = {
  sub: IdentityProvider_OIDC_CorrelationRule.SUB_EQUALS_EXTERNAL_ID,
  oid: IdentityProvider_OIDC_CorrelationRule.OID_EQUALS_EXTERNAL_ID,
};

function oidcOf(idp: IdentityProvider): IdentityProvider_OIDC | undefined {
  return idp.configuration.case === "oidc" ? idp.configuration.value : undefined;
}

function identityProviderView(roles: Map<string, string>): View<IdentityProvider> {
  const view = messageView(IdentityProviderSchema, [
    { header: "ID", value: (p) => p.uid },
    { header: "NAME", value: (p) => p.name },
    { header: "ISSUER", value: (p) => oidcOf(p)?.issuer ?? "" },
    { header: "CLIENT ID", value: (p) => oidcOf(p)?.clientId ?? "" },
    { header: "DEFAULT ROLE", value: (p) => roles.get(p.defaultRole) ?? p.defaultRole },
    { header: "DESCRIPTION", value: (p) => p.description, max: 40 },
    { header: "SCOPES", value: (p) => oidcOf(p)?.additionalScopes.join(",") ?? "", wide: true },
    { header: "GROUPS CLAIM", value: (p) => oidcOf(p)?.groupsClaim ?? "", wide: true },
    { header: "PKCE", value: (p) => (oidcOf(p)?.pkceEnabled ? "yes" : "no"), wide: true },
    { header: "CREATED", value: (p) => time(p.createTime), wide: true },
    { header: "UPDATED", value: (p) => time(p.updateTime), wide: true },
  ]);
  // The server never returns the client secret; clearing it here too keeps it out of any output.
  const withoutSecret = (p: IdentityProvider) => {
    const oidc = oidcOf(p);
    if (!oidc?.clientSecret) return p;
    const copy = clone(IdentityProviderSchema, p);
    oidcOf(copy)!.clientSecret = "";
    return copy;
  };
  return { ...view, json: (p) => toJson(IdentityProviderSchema, withoutSecret(p)) };
}

/** The client secret from --oidc-client-secret or --oidc-client-secret-file (`-`: standard input). */
async function clientSecret(opts: {
  oidcClientSecret?: string;
  oidcClientSecretFile?: string;
}): Promise<string | undefined> {
  if (opts.oidcClientSecret !== undefined && opts.oidcClientSecretFile !== undefined)
    throw new UsageError("pass --oidc-client-secret or --oidc-client-secret-file, not both");
  if (opts.oidcClientSecretFile === undefined) {
    // An empty secret would silently clear the stored one.
    if (opts.oidcClientSecret !== undefined && !opts.oidcClientSecret.trim())
      throw new UsageError("--oidc-client-secret is empty");
    return opts.oidcClientSecret;
  }
  const path = opts.oidcClientSecretFile;
  let text: string;
  try {
    text = path === "-" ? readFileSync(0, "utf8") : await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CliError(
      `cannot read the client secret file ${path}: ${code === "ENOENT" ? "no such file" : (err as Error).message}`,
    );
  }
  const secret = text.trim();
  if (!secret) throw new UsageError(`the client secret file ${path} is empty`);
  return secret;
}

interface OidcFlags {
  oidcIssuer?: string;
  oidcClientId?: string;
  oidcClientSecret?: string;
  oidcClientSecretFile?: string;
  oidcAdditionalScopes?: string[];
  oidcGroupsClaim?: string;
  oidcPkce?: boolean;
}

/** The OIDC flags; create requires the issuer and client id, update takes whichever change. */
function oidcOptions(cmd: Command, required: boolean): Command {
  const flag = (flags: string, description: string) =>
    required ? cmd.requiredOption(flags, description) : cmd.option(flags, description);
  flag("--oidc-issuer <url>", "the provider's issuer URL (https; tokens' `iss` must equal it)");
  flag("--oidc-client-id <id>", "the OAuth client id registered with the provider");
  return cmd
    .option("--oidc-client-secret <secret>", "the OAuth client secret (visible to other local users: prefer the file)")
    .option("--oidc-client-secret-file <path>", "read the client secret from this file (- for standard input)")
    .option("--oidc-additional-scopes <scopes>", "scopes to request besides openid, comma-separated", commaList)
    .option("--oidc-groups-claim <claim>", "the ID token claim that lists the user's groups");
}

function identityProviderCommands(iam: Command): void {
  const idps = iam
    .command("identity-providers")
    .alias("idp")
    .alias("identity-provider")
    .description("OIDC identity providers people in a group sign in through");

  run<OidcFlags & { defaultRole: string; description?: string; oidcCorrelationRule?: string }>(
    oidcOptions(
      clientCommand(idps, "create <name>", {
        description: "add an OIDC identity provider to --parent (the client secret is stored encrypted, never shown)",
        examples: [
          "bulwark iam identity-providers create okta --parent <org uid> --oidc-issuer https://acme.okta.com \\\n" +
            "    --oidc-client-id 0oa1b2c3 --oidc-client-secret-file ./secret --default-role viewer",
          "bulwark iam idp create keycloak --parent <org uid> --oidc-issuer https://sso.acme.dev/realms/acme --oidc-client-id bulwark -o id",
        ],
        parent: true,
      }),
      true,
    )
      .option("--oidc-pkce", "use PKCE in the authorization code flow")
      .addOption(
        new Option("--oidc-correlation-rule <rule>", "how SCIM users match tokens (cannot be changed later)").choices(
          Object.keys(CORRELATION_RULES),
        ),
      )
      .option("--default-role <role>", "the role people signing in through it get: a uid or a name", "viewer")
      .option("--description <text>", "what it is for"),
    async ({ session, print, opts }, name: string) => {
      const parent = await parentUid(session, "identity-providers create");
      const secret = await clientSecret(opts);
      const defaultRole = (await resolveRole(session, opts.defaultRole, parent)).uid;
      const created = await session.call(() =>
        session.client(IdentityProvidersService).createIdentityProvider({
          parent,
          identityProvider: {
            name,
            description: opts.description ?? "",
            defaultRole,
            configuration: {
              case: "oidc",
              value: create(IdentityProvider_OIDCSchema, {
                issuer: opts.oidcIssuer!,
                clientId: opts.oidcClientId!,
                clientSecret: secret ?? "",
                additionalScopes: opts.oidcAdditionalScopes ?? [],
                groupsClaim: opts.oidcGroupsClaim ?? "",
                pkceEnabled: opts.oidcPkce ?? false,
                correlationRule: opts.oidcCorrelationRule ? CORRELATION_RULES[opts.oidcCorrelationRule] : undefined,
              }),
            },
          },
        }),
      );
      print.one(identityProviderView(await roleNames(session, [created.defaultRole])), created);
    },
  );

  run<{ name?: string }>(
    clientCommand(idps, "list", {
      description: "list the identity providers in --parent and the groups below it (or every one you can see)",
      examples: ["bulwark iam identity-providers list --parent <org uid>", "bulwark iam idp list -o wide"],
      parent: true,
      list: true,
    }).option("--name <name>", "only identity providers with this name"),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const client = session.client(IdentityProvidersService);
      const rows = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listIdentityProviders({
            uidp: parent ? { descendantsOf: parent } : undefined,
            name: opts.name ?? "",
            pageSize,
            pageToken,
          }),
        );
        return { items: res.identityProviders, nextPageToken: res.nextPageToken };
      }, opts.limit);
      print.list(
        identityProviderView(
          await roleNames(
            session,
            rows.map((r) => r.defaultRole),
          ),
        ),
        rows,
      );
    },
  );

  run(
    clientCommand(idps, "describe <identity-provider>", {
      description: "show one identity provider (by uid or name); its client secret is never shown",
      examples: ["bulwark iam identity-providers describe <uid>", "bulwark iam idp describe okta -o json"],
    }),
    async ({ session, print }, ref: string) => {
      const idp = await resolveIdentityProvider(session, ref);
      print.one(identityProviderView(await roleNames(session, [idp.defaultRole])), idp);
    },
  );

  run<OidcFlags & { name?: string; description?: string; defaultRole?: string }>(
    oidcOptions(
      clientCommand(idps, "update <identity-provider>", {
        description: "change an identity provider (by uid or name): only the fields given change",
        examples: [
          "bulwark iam identity-providers update <uid> --default-role editor",
          "bulwark iam idp update okta --oidc-client-secret-file ./new-secret --oidc-additional-scopes email,groups",
        ],
      }),
      false,
    )
      .option("--oidc-pkce", "use PKCE")
      .option("--no-oidc-pkce", "stop using PKCE")
      .option("--name <name>", "its new name")
      .option("--description <text>", "its new description")
      .option("--default-role <role>", "the role people signing in through it get: a uid or a name"),
    async ({ session, print, opts }, ref: string) => {
      const secret = await clientSecret(opts);
      const oidc = create(IdentityProvider_OIDCSchema, {
        issuer: opts.oidcIssuer ?? "",
        clientId: opts.oidcClientId ?? "",
        clientSecret: secret ?? "",
        additionalScopes: opts.oidcAdditionalScopes ?? [],
        groupsClaim: opts.oidcGroupsClaim ?? "",
        pkceEnabled: opts.oidcPkce ?? false,
      });
      const given: [unknown, string][] = [
        [opts.name, "name"],
        [opts.description, "description"],
        [opts.defaultRole, "default_role"],
        [opts.oidcIssuer, "oidc.issuer"],
        [opts.oidcClientId, "oidc.client_id"],
        [secret, "oidc.client_secret"],
        [opts.oidcAdditionalScopes, "oidc.additional_scopes"],
        [opts.oidcGroupsClaim, "oidc.groups_claim"],
        [opts.oidcPkce, "oidc.pkce_enabled"],
      ];
      const paths = given.filter(([value]) => value !== undefined).map(([, path]) => path);
      if (!paths.length) throw new UsageError("nothing to change: pass at least one of the options (see --help)");
      const current = await resolveIdentityProvider(session, ref);
      const defaultRole =
        opts.defaultRole === undefined
          ? ""
          : (await resolveRole(session, opts.defaultRole, parentOf(current.uid) ?? "")).uid;
      const updated = await session.call(() =>
        session.client(IdentityProvidersService).updateIdentityProvider({
          identityProvider: {
            uid: current.uid,
            name: opts.name ?? "",
            description: opts.description ?? "",
            defaultRole,
            configuration: { case: "oidc", value: oidc },
          },
          updateMask: create(FieldMaskSchema, { paths }),
        }),
      );
      print.one(identityProviderView(await roleNames(session, [updated.defaultRole])), updated);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(idps, "delete <identity-provider>", {
      description: "remove an identity provider (by uid or name): no one signs in through it any more",
      examples: ["bulwark iam identity-providers delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const idp = await resolveIdentityProvider(session, ref);
      await confirm(io, `Delete the identity provider ${idp.name} (${idp.uid})?`, opts.yes);
      await session.call(() => session.client(IdentityProvidersService).deleteIdentityProvider({ uid: idp.uid }));
      print.done(`deleted identity provider ${idp.name} (${idp.uid})`, { id: idp.uid, json: {} });
    },
  );
}

// ---- account associations ----

function githubSummary(a: AccountAssociation): string {
  if (!a.github) return "";
  return Object.entries(a.github.appInstallations)
    .map(([app, { installations }]) => `app ${app}: ${installations.map((i) => i.installationId).join(",")}`)
    .join("; ");
}

function mapSummary(map: Record<string, string> | undefined): string {
  return Object.entries(map ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

const associationView = messageView(AccountAssociationSchema, [
  { header: "ID", value: (a) => a.uid },
  { header: "NAME", value: (a) => a.name },
  { header: "AMAZON", value: (a) => a.amazon?.account ?? "" },
  {
    header: "GOOGLE",
    value: (a) =>
      a.google ? `${a.google.projectId}${a.google.projectNumber ? ` (${a.google.projectNumber})` : ""}` : "",
  },
  { header: "AZURE", value: (a) => a.azure?.tenantId ?? "" },
  { header: "GITHUB", value: githubSummary, max: 30 },
  { header: "DESCRIPTION", value: (a) => a.description, max: 40 },
  { header: "AZURE CLIENTS", value: (a) => mapSummary(a.azure?.clientIds), wide: true },
  { header: "CHAINGUARD", value: (a) => mapSummary(a.chainguard?.serviceBindings), wide: true },
  { header: "CREATED", value: (a) => time(a.createTime), wide: true },
  { header: "UPDATED", value: (a) => time(a.updateTime), wide: true },
]);

interface SetFlags {
  name?: string;
  description?: string;
  amazon?: string;
  google?: string;
  googleProjectNumber?: string;
  azure?: string;
  azureClientId?: string[];
  github?: string[];
  chainguardServiceBinding?: string[];
}

/** The fields the flags set, and their update-mask paths (only what was given changes). */
function associationPatch(opts: SetFlags): { patch: AccountAssociation; paths: string[] } {
  const patch = create(AccountAssociationSchema, { name: opts.name ?? "", description: opts.description ?? "" });
  const paths: string[] = [];
  if (opts.amazon !== undefined) {
    patch.amazon = create(AccountAssociation_AmazonSchema, { account: opts.amazon });
    paths.push("amazon.account");
  }
  if (opts.google !== undefined || opts.googleProjectNumber !== undefined) {
    patch.google = create(AccountAssociation_GoogleSchema, {
      projectId: opts.google ?? "",
      projectNumber: opts.googleProjectNumber ?? "",
    });
    if (opts.google !== undefined) paths.push("google.project_id");
    if (opts.googleProjectNumber !== undefined) paths.push("google.project_number");
  }
  if (opts.azure !== undefined || opts.azureClientId !== undefined) {
    patch.azure = create(AccountAssociation_AzureSchema, {
      tenantId: opts.azure ?? "",
      clientIds: pairs(opts.azureClientId ?? [], "--azure-client-id"),
    });
    if (opts.azure !== undefined) paths.push("azure.tenant_id");
    if (opts.azureClientId !== undefined) paths.push("azure.client_ids");
  }
  if (opts.github !== undefined) {
    patch.github = create(AccountAssociation_GitHubSchema);
    for (const entry of opts.github) {
      const m = /^(\d+):(\d+)(?::(.*))?$/.exec(entry);
      if (!m) throw new UsageError(`--github takes <app id>:<installation id>[:<name>], not ${JSON.stringify(entry)}`);
      const app = (patch.github.appInstallations[m[1]!] ??= create(AccountAssociation_GitHubAppInstallationsSchema));
      app.installations.push(
        create(AccountAssociation_GitHubInstallationSchema, { installationId: BigInt(m[2]!), name: m[3] ?? "" }),
      );
    }
    paths.push("github.app_installations");
  }
  if (opts.chainguardServiceBinding !== undefined) {
    patch.chainguard = create(AccountAssociation_ChainguardSchema, {
      serviceBindings: pairs(opts.chainguardServiceBinding, "--chainguard-service-binding"),
    });
    paths.push("chainguard.service_bindings");
  }
  if (!paths.length && opts.name === undefined && opts.description === undefined)
    throw new UsageError("nothing to set: pass --amazon, --google, --azure, --github or --chainguard-service-binding");
  if (opts.name !== undefined) paths.push("name");
  if (opts.description !== undefined) paths.push("description");
  return { patch, paths };
}

const PROVIDER_BLOCKS = ["amazon", "google", "azure", "github", "chainguard"] as const;
type ProviderBlock = (typeof PROVIDER_BLOCKS)[number];

/** The providers CheckAccountAssociation can check. */
const CHECKABLE: Partial<Record<ProviderBlock, AccountProviderType>> = {
  amazon: AccountProviderType.AMAZON,
  google: AccountProviderType.GOOGLE,
  azure: AccountProviderType.AZURE,
};

interface CheckRow {
  provider: string;
  result: CheckAccountAssociationResponse;
}

const checkView: View<CheckRow> = {
  columns: [
    { header: "PROVIDER", value: (r) => r.provider },
    { header: "STATUS", value: (r) => CheckStatus[r.result.status] ?? String(r.result.status) },
    { header: "REASON", value: (r) => r.result.reason },
    { header: "MESSAGE", value: (r) => r.result.message },
  ],
  id: (r) => r.provider,
  json: (r) => ({ provider: r.provider, ...(toJson(CheckAccountAssociationResponseSchema, r.result) as object) }),
};

function accountAssociationCommands(iam: Command): void {
  const associations = iam
    .command("account-associations")
    .alias("account-association")
    .description("the cloud accounts a group is associated with (one association per group)");

  run<SetFlags>(
    clientCommand(associations, "set <group>", {
      description:
        "associate a group (uid or name) with cloud accounts: creates its association, or changes only the given fields of the existing one",
      examples: [
        "bulwark iam account-associations set <group uid> --amazon 123456789012",
        "bulwark iam account-associations set acme --google my-project --google-project-number 123456789",
        "bulwark iam account-associations set acme --azure <tenant uuid> --azure-client-id registry=<client uuid>",
        "bulwark iam account-associations set acme --github 12345:67890:acme-bot",
      ],
    })
      .option("--amazon <account>", "the 12-digit AWS account id")
      .option("--google <project id>", "the Google Cloud project id")
      .option("--google-project-number <number>", "the Google Cloud project number")
      .option("--azure <tenant id>", "the Azure tenant id (a UUID)")
      .option(
        "--azure-client-id <name=id>",
        "an Azure client id by name (repeatable; replaces the stored ones)",
        repeatable,
      )
      .option(
        "--github <app:installation[:name]>",
        "a GitHub app installation (repeatable; replaces the stored ones)",
        repeatable,
      )
      .option(
        "--chainguard-service-binding <service=target>",
        "a service binding (repeatable; replaces the stored ones)",
        repeatable,
      )
      .option("--name <name>", "the association's name (default: the group's name)")
      .option("--description <text>", "what it is for"),
    async ({ session, print, opts }, ref: string) => {
      const { patch, paths } = associationPatch(opts);
      const group = isValidUidp(ref) ? undefined : await resolveGroup(session, ref);
      const uid = group?.uid ?? ref;
      const client = session.client(AccountAssociationsService);
      const existing = await session.call(() => orMissing(client.getAccountAssociation({ uid })));
      let result: AccountAssociation;
      if (existing) {
        patch.uid = uid;
        result = await session.call(() =>
          client.updateAccountAssociation({
            accountAssociation: patch,
            updateMask: create(FieldMaskSchema, { paths }),
          }),
        );
      } else {
        if (!patch.name) patch.name = (group ?? (await resolveGroup(session, uid))).name;
        result = await session.call(() => client.createAccountAssociation({ parent: uid, accountAssociation: patch }));
      }
      print.one(associationView, result);
    },
  );

  run<{ yes?: boolean } & Partial<Record<ProviderBlock, boolean>>>(
    clientCommand(associations, "unset <group>", {
      description:
        "remove a group's account association, or only the providers named (when none would be left, the association is removed)",
      examples: [
        "bulwark iam account-associations unset <group uid> --yes",
        "bulwark iam account-associations unset acme --amazon --yes",
      ],
    })
      .option("--amazon", "remove only the AWS account")
      .option("--google", "remove only the Google Cloud project")
      .option("--azure", "remove only the Azure tenant")
      .option("--github", "remove only the GitHub app installations")
      .option("--chainguard", "remove only the Chainguard service bindings")
      .option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const uid = await groupUid(session, ref);
      const client = session.client(AccountAssociationsService);
      const named = PROVIDER_BLOCKS.filter((block) => opts[block]);
      if (named.length) {
        const current = await session.call(() => client.getAccountAssociation({ uid }));
        const absent = named.filter((block) => current[block] === undefined);
        if (absent.length)
          throw new CliError(`the account association of ${uid} has no ${absent.join(", ")} to remove`);
        const remaining = PROVIDER_BLOCKS.filter((block) => current[block] !== undefined && !named.includes(block));
        if (remaining.length) {
          await confirm(io, `Remove ${named.join(", ")} from the account association of ${uid}?`, opts.yes);
          const updated = await session.call(() =>
            client.updateAccountAssociation({
              accountAssociation: { uid },
              updateMask: create(FieldMaskSchema, { paths: named }),
            }),
          );
          print.one(associationView, updated);
          return;
        }
      }
      // Nothing would be left (an association needs at least one provider): remove it.
      await confirm(io, `Delete the account association of ${uid}?`, opts.yes);
      await session.call(() => client.deleteAccountAssociation({ uid }));
      print.done(`deleted the account association of ${uid}`, { id: uid, json: {} });
    },
  );

  run<Partial<Record<ProviderBlock, boolean>>>(
    clientCommand(associations, "check <group>", {
      description:
        "check whether a group's cloud accounts are usable (default: each configured AWS, Google Cloud and Azure account).\n" +
        "Exit status: 0 when every checked provider is READY, 1 otherwise (the results are printed either way)",
      examples: [
        "bulwark iam account-associations check <group uid>",
        "bulwark iam account-associations check acme --amazon -o json",
      ],
    })
      .option("--amazon", "check the AWS account")
      .option("--google", "check the Google Cloud project")
      .option("--azure", "check the Azure tenant"),
    async ({ session, print, opts }, ref: string) => {
      const uid = await groupUid(session, ref);
      const client = session.client(AccountAssociationsService);
      let providers = (Object.keys(CHECKABLE) as ProviderBlock[]).filter((p) => opts[p]);
      if (!providers.length) {
        const current = await session.call(() => client.getAccountAssociation({ uid }));
        providers = (Object.keys(CHECKABLE) as ProviderBlock[]).filter((p) => current[p] !== undefined);
        if (!providers.length)
          throw new CliError(`the account association of ${uid} has no amazon, google or azure account to check`);
      }
      const rows: CheckRow[] = [];
      for (const provider of providers)
        rows.push({
          provider,
          result: await session.call(() => client.checkAccountAssociation({ uid, providerType: CHECKABLE[provider]! })),
        });
      print.list(checkView, rows);
      const notReady = rows.filter((r) => r.result.status !== CheckStatus.READY).map((r) => r.provider);
      if (notReady.length) throw new CliError(`not ready: ${notReady.join(", ")}`);
    },
  );

  run(
    clientCommand(associations, "describe <group>", {
      description: "show a group's account association",
      examples: [
        "bulwark iam account-associations describe <group uid>",
        "bulwark iam account-associations describe acme -o json",
      ],
    }),
    async ({ session, print }, ref: string) => {
      const uid = await groupUid(session, ref);
      print.one(
        associationView,
        await session.call(() => session.client(AccountAssociationsService).getAccountAssociation({ uid })),
      );
    },
  );

  run(
    clientCommand(associations, "list", {
      description: "list the account associations of --parent and the groups below it (or every one you can see)",
      examples: [
        "bulwark iam account-associations list",
        "bulwark iam account-associations list --parent <org uid> -o wide",
      ],
      parent: true,
      list: true,
    }),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const client = session.client(AccountAssociationsService);
      const rows = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listAccountAssociations({ uidp: parent ? { descendantsOf: parent } : undefined, pageSize, pageToken }),
        );
        return { items: res.accountAssociations, nextPageToken: res.nextPageToken };
      }, opts.limit);
      print.list(associationView, rows);
    },
  );
}

export function registerOrgSettings(iam: Command): void {
  identityProviderCommands(iam);
  accountAssociationCommands(iam);
}
