// The `bulwark` command line.
import { Command, Option } from "commander";
import { pino } from "pino";
import { DEFAULT_CONFIG, startServer } from "../server/start.js";
import { adminToken } from "./admin.js";

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`invalid port: ${value}`);
  return n;
}

/** Options shared by every command that opens the database. */
function databaseOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option("--data-dir <dir>", "embedded PGlite data directory").env("BULWARK_DATA_DIR").default(DEFAULT_CONFIG.dataDir))
    .addOption(new Option("--database-url <url>", "PostgreSQL connection string; when set, PGlite is not used").env("DATABASE_URL"));
}

/** The public URLs of the issuer, the API and the registry; by default the server's own. */
function urlOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option("--port <port>", "port to listen on").env("BULWARK_PORT").default(DEFAULT_CONFIG.port).argParser(parsePort))
    .addOption(new Option("--host <host>", "address to bind").env("BULWARK_HOST").default(DEFAULT_CONFIG.host))
    .addOption(new Option("--issuer-url <url>", "{auth_url}: public URL of the token issuer (default: http://<host>:<port>)").env("BULWARK_ISSUER_URL"))
    .addOption(new Option("--api-url <url>", "{base_url}: public URL of the API, the audience of API tokens (default: http://<host>:<port>)").env("BULWARK_API_URL"))
    .addOption(new Option("--registry-host <host>", "{registry_host}: the registry's host, the audience of registry tokens (default: <host>:<port>)").env("BULWARK_REGISTRY_HOST"));
}

interface UrlOpts {
  port: number;
  host: string;
  issuerUrl?: string;
  apiUrl?: string;
  registryHost?: string;
}

function ownUrl(o: UrlOpts): string {
  return `http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${o.port}`;
}

export function buildCli(): Command {
  const program = new Command("bulwark").description("Identity, Registry and Vulnerability Management API server").showHelpAfterError();

  urlOptions(databaseOptions(program.command("serve")))
    .description("start the API server (REST/JSON, gRPC, gRPC-Web and Connect on one port)")
    .addOption(new Option("--error-domain <domain>", "ErrorInfo.domain reported in errors").env("BULWARK_ERROR_DOMAIN").default(DEFAULT_CONFIG.errorDomain))
    .addOption(new Option("--log-level <level>", "log level").env("BULWARK_LOG_LEVEL").default("info"))
    .action(async (opts: UrlOpts & { dataDir: string; databaseUrl?: string; errorDomain: string; logLevel: string }) => {
      const logger = pino({ level: opts.logLevel });
      const server = await startServer({ ...opts, logger });
      logger.info(
        { url: server.url, issuer: server.tokens.urls.issuer, database: server.backend === "postgres" ? "postgres" : `pglite:${opts.dataDir}` },
        `bulwark listening on ${server.url}`,
      );
      let stopping = false;
      const stop = async (signal: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ signal }, "shutting down");
        try {
          await server.close();
          process.exit(0);
        } catch (err) {
          logger.error({ err }, "error during shutdown");
          process.exit(1);
        }
      };
      process.on("SIGTERM", () => void stop("SIGTERM"));
      process.on("SIGINT", () => void stop("SIGINT"));
    });

  const admin = program.command("admin").description("operator commands (need access to the database, not the network)");
  urlOptions(databaseOptions(admin.command("token")))
    .description("print a one-hour API token for the platform operator, who may do everything")
    .addOption(new Option("--audience <aud>", "token audience (default: the API URL)"))
    .action(async (opts: UrlOpts & { dataDir: string; databaseUrl?: string; audience?: string }) => {
      const own = ownUrl(opts);
      const urls = { issuer: opts.issuerUrl ?? own, apiAudience: opts.apiUrl ?? own, registryAudience: opts.registryHost ?? new URL(own).host };
      const { token } = await adminToken({ dataDir: opts.dataDir, databaseUrl: opts.databaseUrl, urls, audience: opts.audience ?? urls.apiAudience });
      process.stdout.write(token + "\n");
    });
  return program;
}

buildCli()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    console.error(`bulwark: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
