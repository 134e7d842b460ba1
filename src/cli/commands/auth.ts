// `bulwark auth`: log in, print tokens, who the token is and what it may do, log out; the
// registry's credentials (configure-docker, pull tokens) are in registry-auth.ts.
import { toJson } from "@bufbuild/protobuf";
import { EmptySchema } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import { Option, type Command } from "commander";
import { decodeJwt } from "jose";
import { Auth, WhoAmISchema, type WhoAmI } from "../../gen/platform/auth/v1/auth.platform_pb.js";
import { login, logout, saveHumanLogin } from "../auth.js";
import { browserLogin, headlessLogin } from "../browser-login.js";
import { clientCommand, examples, run } from "../command.js";
import { explain, UsageError } from "../errors.js";
import { ioOf } from "../io.js";
import { time } from "../output.js";
import type { Session } from "../session.js";
import { resolveSettings, SETTINGS } from "../settings.js";
import { registerRegistryAuth } from "./registry-auth.js";

async function whoAmI(session: Session): Promise<WhoAmI> {
  return session.call(() => session.client(Auth).validate(create(EmptySchema)));
}

interface CapabilityRow {
  groupId: string;
  groupName: string;
  role: string;
  capabilities: string[];
}

function capabilityRows(who: WhoAmI): CapabilityRow[] {
  return who.capabilities.map((c) => ({
    groupId: c.group?.id ?? "",
    groupName: c.group?.name ?? "",
    role: c.role?.name ?? "",
    capabilities: c.role?.capabilities ?? [],
  }));
}

const capabilityView = {
  columns: [
    { header: "GROUP ID", value: (r: CapabilityRow) => r.groupId },
    { header: "GROUP", value: (r: CapabilityRow) => r.groupName },
    { header: "ROLE", value: (r: CapabilityRow) => r.role },
    { header: "CAPABILITIES", value: (r: CapabilityRow) => r.capabilities.join(", "), max: 60 },
  ],
  id: (r: CapabilityRow) => r.groupId,
  json: (r: CapabilityRow) => r,
};

export function registerAuth(program: Command): void {
  const auth = program.command("auth").description("log in, get API tokens, see who you are and what you may do");

  examples(
    auth
      .command("login")
      .addOption(new Option("--api-url <url>", SETTINGS["api-url"].description + " [env BULWARK_API_URL]"))
      .addOption(new Option("--issuer-url <url>", SETTINGS["issuer-url"].description + " [env BULWARK_ISSUER_URL]"))
      .description(
        "sign in and keep an API token (0600, in the user's config dir): in a browser, or as a workload with --identity",
      )
      .option("--identity <uid>", "assume this identity with --identity-token (workloads)")
      .option("--identity-token <jwt|path>", "the workload's OIDC token, or a file holding it (re-read on refresh)")
      .option("--identity-provider <uid>", "sign in through this organization's identity provider")
      .option("--invite-code <code>", "accept this group invite after signing in")
      .option("--headless", "no browser here: approve a code in a browser elsewhere")
      .option("--no-browser", "print the sign-in URL without opening a browser"),
    [
      "bulwark auth login",
      "bulwark auth login --headless --api-url https://api.example.com",
      "bulwark auth login --identity <identity uid> --identity-token /var/run/secrets/oidc-token",
    ],
  ).action(
    async (
      opts: {
        apiUrl?: string;
        issuerUrl?: string;
        identity?: string;
        identityToken?: string;
        identityProvider?: string;
        inviteCode?: string;
        headless?: boolean;
        browser: boolean;
      },
      command: Command,
    ) => {
      const io = ioOf(command);
      const settings = await resolveSettings({ "api-url": opts.apiUrl, "issuer-url": opts.issuerUrl }, io.env);
      const apiUrl = settings["api-url"].value!;
      const issuerUrl = settings["issuer-url"].value!;
      const hint = "Check the identity uid and that its token matches the identity's issuer and subject.";
      try {
        if (opts.identity || opts.identityToken) {
          if (!opts.identity || !opts.identityToken)
            throw new UsageError("--identity and --identity-token go together");
          const forPeople = [
            ["--identity-provider", opts.identityProvider],
            ["--invite-code", opts.inviteCode],
            ["--headless", opts.headless],
            ["--no-browser", opts.browser ? undefined : true],
          ].filter(([, given]) => given !== undefined);
          if (forPeople.length)
            throw new UsageError(
              `${forPeople.map(([flag]) => flag).join(", ")}: for signing in people, not with --identity`,
            );
          const creds = await login(io.env, {
            apiUrl,
            issuerUrl,
            identity: opts.identity,
            identityToken: opts.identityToken,
          });
          io.stdout.write(`logged in as ${opts.identity}; token expires ${creds.tokens[creds.apiUrl]!.expiry}\n`);
          return;
        }
        const human = {
          issuerUrl,
          identityProvider: opts.identityProvider,
          inviteCode: opts.inviteCode,
          noBrowser: !opts.browser,
          say: (l: string) => void io.stderr.write(l + "\n"),
        };
        const signedIn = opts.headless ? await headlessLogin(human) : await browserLogin(human);
        await saveHumanLogin(io.env, apiUrl, issuerUrl, signedIn);
        io.stdout.write(`signed in; token expires ${signedIn.expiry.toISOString()}\n`);
      } catch (err) {
        throw explain(err, issuerUrl, { unauthenticated: hint, permissionDenied: hint });
      }
    },
  );

  const token = run<{ audience?: string }>(
    clientCommand(auth, "token", {
      description:
        "print a valid token: --token-file, BULWARK_TOKEN, else the stored login's (refreshed through the exchange when possible)",
      examples: ["bulwark auth token", "bulwark auth token --audience 127.0.0.1:8080   # for the registry"],
    }).option("--audience <aud>", "token audience (default: the API URL; the registry host for registry tokens)"),
    async ({ session, print, opts }) => {
      const { token } = await session.token(opts.audience);
      let expiry: string | undefined;
      try {
        expiry = new Date((decodeJwt(token).exp ?? 0) * 1000).toISOString();
      } catch {
        expiry = undefined;
      }
      print.done(token, { id: token, json: { token, expiry } });
    },
  );

  run(
    clientCommand(token, "capabilities", {
      description: "list what the token may do: its role in each group, with the role's capabilities",
      examples: ["bulwark auth token capabilities", "bulwark auth token capabilities -o json"],
    }),
    async ({ session, print }) => {
      print.list(capabilityView, capabilityRows(await whoAmI(session)));
    },
  );

  run(
    clientCommand(auth, "status", {
      description: "show who the token belongs to, when it expires, and its roles",
      examples: ["bulwark auth status", "bulwark auth status -o json", "bulwark auth status -o terse   # the subject"],
    }),
    async ({ session, print }) => {
      const who = await whoAmI(session);
      if (print.format === "json") {
        print.write(JSON.stringify(toJson(WhoAmISchema, who), null, 2) + "\n");
        return;
      }
      if (print.format === "id" || print.format === "terse") {
        print.write(who.subject + "\n");
        return;
      }
      const lines = [
        ["subject", who.subject],
        ...(who.email ? [["email", who.email]] : []),
        ["issuer", who.issuer],
        ["audience", who.audience.join(", ")],
        ["expires", time(who.expiry)],
      ];
      print.write(lines.map(([k, v]) => `${print.style.bold(`${k}:`)} ${v}`).join("\n") + "\n");
      if (who.capabilities.length) {
        print.write("\n");
        print.list(capabilityView, capabilityRows(who));
      }
    },
  );

  examples(auth.command("logout").description("forget the stored tokens"), ["bulwark auth logout"]).action(
    async (_opts: unknown, command: Command) => {
      const io = ioOf(command);
      io.stdout.write((await logout(io.env)) ? "logged out\n" : "not logged in\n");
    },
  );

  registerRegistryAuth(auth);
}
