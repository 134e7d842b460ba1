// Starts the real server on an ephemeral port over a fresh database of the given backend.
import { pino } from "pino";
import { startServer, type RunningServer } from "../../src/server/start.js";
import { clonePglite, clonePostgres, type Backend } from "./db-templates.js";

export const ERROR_DOMAIN = "test.bulwark.dev";

export interface TestServer extends RunningServer {
  backend: Backend;
}

export async function startTestServer(backend: Backend): Promise<TestServer> {
  const common = { port: 0, host: "127.0.0.1", dataDir: "", errorDomain: ERROR_DOMAIN, logger: pino({ level: process.env.BULWARK_TEST_LOG ?? "silent" }) };
  if (backend === "pglite") {
    const server = await startServer({ ...common, pglite: await clonePglite() });
    return { ...server, backend };
  }
  const { url, drop } = await clonePostgres();
  const server = await startServer({ ...common, databaseUrl: url });
  return {
    ...server,
    backend,
    close: async () => {
      await server.close();
      await drop();
    },
  };
}
