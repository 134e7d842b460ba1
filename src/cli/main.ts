// The `bulwark` command line.
import { Command, Option } from "commander";
import { pino } from "pino";
import { DEFAULT_CONFIG, startServer } from "../server/start.js";

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`invalid port: ${value}`);
  return n;
}

export function buildCli(): Command {
  const program = new Command("bulwark").description("Identity, Registry and Vulnerability Management API server").showHelpAfterError();

  program
    .command("serve")
    .description("start the API server (REST/JSON, gRPC, gRPC-Web and Connect on one port)")
    .addOption(new Option("--port <port>", "port to listen on").env("BULWARK_PORT").default(DEFAULT_CONFIG.port).argParser(parsePort))
    .addOption(new Option("--host <host>", "address to bind").env("BULWARK_HOST").default(DEFAULT_CONFIG.host))
    .addOption(new Option("--data-dir <dir>", "embedded PGlite data directory").env("BULWARK_DATA_DIR").default(DEFAULT_CONFIG.dataDir))
    .addOption(new Option("--database-url <url>", "PostgreSQL connection string; when set, PGlite is not used").env("DATABASE_URL"))
    .addOption(new Option("--error-domain <domain>", "ErrorInfo.domain reported in errors").env("BULWARK_ERROR_DOMAIN").default(DEFAULT_CONFIG.errorDomain))
    .addOption(new Option("--log-level <level>", "log level").env("BULWARK_LOG_LEVEL").default("info"))
    .action(async (opts: { port: number; host: string; dataDir: string; databaseUrl?: string; errorDomain: string; logLevel: string }) => {
      const logger = pino({ level: opts.logLevel });
      const server = await startServer({ ...opts, logger });
      logger.info(
        { url: server.url, database: server.backend === "postgres" ? "postgres" : `pglite:${opts.dataDir}` },
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
  return program;
}

buildCli()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    console.error(`bulwark: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
