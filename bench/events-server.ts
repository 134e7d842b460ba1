// A Bulwark server for bench/events.mjs, started from the sources: with every module, or without
// the events module (the baseline of what the outbox costs a mutating RPC). Prints its URL and an
// operator token on one line once it listens.
import { pino } from "pino";
import { MODULES } from "../src/server/modules.js";
import { startServer } from "../src/server/start.js";
import { authModule, OPERATOR_SUBJECT } from "../src/auth/api.js";

const [mode, databaseUrl] = process.argv.slice(2);
const modules = mode === "without-events" ? MODULES.filter((m) => m.name !== "events") : MODULES;
const server = await startServer({
  port: 0,
  host: "127.0.0.1",
  dataDir: "",
  errorDomain: "bench.bulwark.dev",
  databaseUrl,
  logger: pino({ level: "warn" }),
  rateLimits: false,
  modules,
  moduleSettings:
    mode === "without-events"
      ? {}
      : {
          events: {
            allowInsecureSinks: true,
            deliveryBackoffMinMs: 20,
            deliveryBackoffMaxMs: 100,
            deliveryPollMs: 100,
          },
        },
});
const issuer = server.exportsOf(authModule).issuer;
const { token } = await issuer.mint({ subject: OPERATOR_SUBJECT, audience: [issuer.urls.apiAudience] });
console.log(`ready ${server.url} ${token}`);
process.on("SIGTERM", () => void server.close().then(() => process.exit(0)));
