// Composition root: database, migrations, services, transports, listening socket.
import type { AddressInfo } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
import { pino, type Logger } from "pino";
import { PageTokenCodec, loadSharedSecret } from "../core/page-tokens.js";
import { allowAll, type Authorizer, type ServiceBinding } from "../core/service.js";
import { groupsService } from "../iam/groups.js";
import { migrate, openDatabase, type Db } from "../store/db.js";
import { GroupsRepository } from "../store/groups.js";
import { createApp } from "./app.js";

export interface ServerConfig {
  port: number;
  host: string;
  /** PGlite data directory (ignored when databaseUrl is set) */
  dataDir: string;
  databaseUrl?: string;
  /** ErrorInfo.domain of every error */
  errorDomain: string;
  logLevel?: string;
  /** tests pass a PGlite cloned from a migrated template */
  pglite?: PGlite;
  logger?: Logger;
}

export const DEFAULT_CONFIG: ServerConfig = {
  port: 8080,
  host: "127.0.0.1",
  dataDir: "./data",
  errorDomain: "bulwark.dev",
};

export interface RunningServer {
  url: string;
  port: number;
  db: Db;
  backend: "pglite" | "postgres";
  close(): Promise<void>;
}

export function buildServices(db: Db, tokens: PageTokenCodec): ServiceBinding[] {
  const now = () => new Date();
  const lists = { tokens };
  return [groupsService({ groups: new GroupsRepository(db), lists, now })];
}

export async function startServer(config: ServerConfig, authorizer: Authorizer = allowAll): Promise<RunningServer> {
  const logger = config.logger ?? pino({ level: config.logLevel ?? "info", redact: ["req.headers.authorization"] });
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, pglite: config.pglite });
  try {
    await migrate(database.db);
    const secret = process.env.BULWARK_PAGE_TOKEN_SECRET
      ? new TextEncoder().encode(process.env.BULWARK_PAGE_TOKEN_SECRET)
      : await loadSharedSecret(database.db, "page_tokens");
    const tokens = PageTokenCodec.fromSecret(secret);
    const { fastify, dual } = await createApp({
      bindings: buildServices(database.db, tokens),
      authorizer,
      errorDomain: config.errorDomain,
      logger,
    });
    await fastify.listen({ port: config.port, host: config.host });
    const port = (dual.front.address() as AddressInfo).port;
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      db: database.db,
      backend: database.backend,
      close: () =>
        (closing ??= (async () => {
          dual.closeConnections();
          // In-flight requests get a grace period; then whatever is still open is cut.
          const force = setTimeout(() => dual.destroyConnections(), 5_000);
          try {
            await fastify.close();
          } finally {
            clearTimeout(force);
          }
          await database.close();
        })()),
    };
  } catch (err) {
    await database.close();
    throw err;
  }
}
