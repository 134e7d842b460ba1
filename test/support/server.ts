// Starts the real server on an ephemeral port over a fresh database of the given backend.
import { pino } from "pino";
import type { Interceptor } from "@connectrpc/connect";
import type { UpstreamProvider } from "../../src/auth/login.js";
import { OPERATOR_SUBJECT, type MintRequest } from "../../src/auth/tokens.js";
import { startServer, type RunningServer } from "../../src/server/start.js";
import { clonePglite, clonePostgres, type Backend } from "./db-templates.js";

export const ERROR_DOMAIN = "test.bulwark.dev";

export interface TestServer extends RunningServer {
  backend: Backend;
  /** a token of the platform operator, who may do everything */
  operatorToken: string;
  /** an API token for an identity (or any subject), minted by the server's own issuer */
  tokenFor(subject: string, options?: Partial<MintRequest>): Promise<string>;
}

/** A Connect interceptor that sends `Authorization: Bearer <token>`. */
export function bearer(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

async function withTokens(server: RunningServer, backend: Backend, close = server.close): Promise<TestServer> {
  const tokenFor = async (subject: string, options: Partial<MintRequest> = {}) =>
    (await server.tokens.mint({ subject, audience: [server.tokens.urls.apiAudience], ...options })).token;
  return { ...server, backend, close, tokenFor, operatorToken: await tokenFor(OPERATOR_SUBJECT) };
}

/** Test servers reach the test OIDC issuers on 127.0.0.1 over http, so both default to on. */
export interface TestServerOptions {
  allowInsecureIssuers?: boolean;
  allowPrivateIssuerAddresses?: boolean;
  /** the platform's default upstream OIDC provider for human sign-in */
  defaultUpstream?: UpstreamProvider;
}

export async function startTestServer(backend: Backend, options: TestServerOptions = {}): Promise<TestServer> {
  const common = {
    port: 0,
    host: "127.0.0.1",
    dataDir: "",
    errorDomain: ERROR_DOMAIN,
    logger: pino({ level: process.env.BULWARK_TEST_LOG ?? "silent" }),
    allowInsecureIssuers: options.allowInsecureIssuers ?? true,
    allowPrivateIssuerAddresses: options.allowPrivateIssuerAddresses ?? true,
    defaultUpstream: options.defaultUpstream,
  };
  if (backend === "pglite") {
    const server = await startServer({ ...common, pglite: await clonePglite() });
    return withTokens(server, backend);
  }
  const { url, drop } = await clonePostgres();
  const server = await startServer({ ...common, databaseUrl: url });
  return withTokens(server, backend, async () => {
    await server.close();
    await drop();
  });
}
