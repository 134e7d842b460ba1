// What every client command shares: its resolved settings, a token, generated Connect clients
// for the API (never URLs built by hand), and failures turned into sentences.
// Where the token comes from, first found wins: --token-file / BULWARK_TOKEN_FILE, BULWARK_TOKEN,
// a token-file in the config file, then what `bulwark auth login` stored for this API (refreshed
// through the token exchange when it can be).
import { readFile } from "node:fs/promises";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { decodeJwt } from "jose";
import { exchange, token as storedToken } from "./auth.js";
import { loadCredentials } from "./credentials.js";
import { CliError, explain } from "./errors.js";
import { resolveSettings, type OutputFormat, type Resolved, type SettingName } from "./settings.js";

/** The options every client command takes (commander's camelCase names). */
export interface ClientFlags {
  apiUrl?: string;
  issuerUrl?: string;
  registry?: string;
  parent?: string;
  output?: string;
  tokenFile?: string;
}

export interface TokenSource {
  token: string;
  /** where it came from, in words, for error messages */
  origin: string;
}

const STORED_LOGIN = "the stored login (`bulwark auth login`)";
const REFRESH_HINT =
  "Run `bulwark auth login`, or set BULWARK_TOKEN (an operator: BULWARK_TOKEN=$(bulwark admin token)).";

function expiryOf(token: string): Date | undefined {
  try {
    const exp = decodeJwt(token).exp;
    return exp === undefined ? undefined : new Date(exp * 1000);
  } catch {
    return undefined;
  }
}

export class Session {
  private constructor(
    readonly settings: Record<SettingName, Resolved>,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  static async open(flags: ClientFlags, env: NodeJS.ProcessEnv): Promise<Session> {
    const settings = await resolveSettings(
      {
        "api-url": flags.apiUrl,
        "issuer-url": flags.issuerUrl,
        registry: flags.registry,
        "default-group": flags.parent,
        output: flags.output,
        "token-file": flags.tokenFile,
      },
      env,
    );
    return new Session(settings, env);
  }

  get apiUrl(): string {
    return this.settings["api-url"].value!;
  }
  get issuerUrl(): string {
    return this.settings["issuer-url"].value!;
  }
  get registryHost(): string {
    return this.settings.registry.value!;
  }
  get output(): OutputFormat {
    return this.settings.output.value as OutputFormat;
  }

  /** The group a command works in: --parent, else the configured default group. */
  parent(required: true, what?: string): string;
  parent(required?: false): string | undefined;
  parent(required = false, what = "this command"): string | undefined {
    const value = this.settings["default-group"].value;
    if (!value && required)
      throw new CliError(
        `${what} needs a group: pass --parent <group uid>, or set a default with \`bulwark config set default-group <uid>\``,
        2,
      );
    return value;
  }

  #apiToken?: TokenSource;

  /** A token for the API (or, through the exchange, for `audience`). */
  async token(audience?: string): Promise<TokenSource> {
    if (audience === undefined && this.#apiToken) return this.#apiToken;
    let found: TokenSource | undefined;
    // A token file named on the command line or in the environment, then BULWARK_TOKEN, then one
    // named in the config file: the environment beats the config file, as for every setting.
    const file = this.settings["token-file"];
    const fileFirst = file.value && (file.source === "flag" || file.source === "env");
    if (fileFirst) found = await this.tokenFile(file.value!);
    else if (this.env.BULWARK_TOKEN?.trim()) found = { token: this.env.BULWARK_TOKEN.trim(), origin: "BULWARK_TOKEN" };
    else if (file.value) found = await this.tokenFile(file.value);
    if (found) {
      const expiry = expiryOf(found.token);
      if (expiry && expiry.getTime() <= Date.now())
        throw new CliError(
          `the token in ${found.origin} expired at ${expiry.toISOString()}: get a new one ` +
            "(an operator: `bulwark admin token`; otherwise `bulwark auth token`), or unset it to use `bulwark auth login`'s",
        );
      if (audience !== undefined && audience !== this.apiUrl) {
        const minted = await exchange(this.issuerUrl, found.token, { audience }).catch((err: unknown) => {
          throw explain(err, this.issuerUrl, { unauthenticated: REFRESH_HINT });
        });
        return { token: minted.token, origin: `the exchange of ${found.origin}` };
      }
    } else {
      // The stored login's token goes only to the API it was obtained for.
      const login = await loadCredentials(this.env);
      if (login && login.apiUrl !== this.apiUrl)
        throw new CliError(
          `the stored login is for ${login.apiUrl}, not ${this.apiUrl}: run \`bulwark auth login --api-url ${this.apiUrl}\`, ` +
            "or set BULWARK_TOKEN",
        );
      const token = await storedToken(this.env, audience).catch((err: unknown) => {
        throw explain(err, this.issuerUrl, { unauthenticated: REFRESH_HINT });
      });
      found = { token, origin: STORED_LOGIN };
    }
    if (audience === undefined) this.#apiToken = found;
    return found;
  }

  private async tokenFile(path: string): Promise<TokenSource> {
    const text = await readFile(path, "utf8").catch((err: NodeJS.ErrnoException) => {
      throw new CliError(`cannot read the token file ${path}: ${err.code === "ENOENT" ? "no such file" : err.message}`);
    });
    if (!text.trim()) throw new CliError(`the token file ${path} is empty`);
    return { token: text.trim(), origin: `the token file ${path}` };
  }

  #transport?: ReturnType<typeof createConnectTransport>;

  /** A generated client for one of the API's services, authenticated with the session's token. */
  client<T extends DescService>(service: T): Client<T> {
    if (!this.#transport) {
      const bearer: Interceptor = (next) => async (req) => {
        req.header.set("authorization", `Bearer ${(await this.token()).token}`);
        return next(req);
      };
      this.#transport = createConnectTransport({
        baseUrl: this.apiUrl,
        httpVersion: "1.1",
        useBinaryFormat: true,
        interceptors: [bearer],
      });
    }
    return createClient(service, this.#transport);
  }

  /** Runs a call and turns any failure into words (server refusals, an unreachable server, bad tokens). */
  async call<R>(fn: () => Promise<R>): Promise<R> {
    await this.token(); // its own failures are already in words
    try {
      return await fn();
    } catch (err) {
      const origin = this.#apiToken?.origin;
      throw explain(err, this.apiUrl, {
        unauthenticated:
          origin && origin !== STORED_LOGIN ? `The token came from ${origin}. ${REFRESH_HINT}` : REFRESH_HINT,
      });
    }
  }
}
