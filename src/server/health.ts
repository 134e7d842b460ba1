// The probes: /livez answers while the process serves (nothing else is asked: a liveness probe
// that failed with the database would restart every replica during a database outage), /readyz
// only when this replica can do its work: the database reachable and migrated, every module's own
// checks (the registry's blob store writable), and no shutdown begun. A shutdown flips /readyz
// first, so load balancers drain the replica before its listener closes (start.ts `close`).
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { NotReady } from "../platform/health.js";
import type { ReadinessCheck } from "../platform/module.js";
import { outcomeOf } from "./request-log.js";

/** A check that has not answered by then fails as "timed out" (a probe must get an answer). */
export const CHECK_TIMEOUT_MS = 5_000;

export interface CheckResult {
  name: string;
  status: "SERVING" | "NOT_SERVING";
  /** why not, in words a probe may see ("unreachable", "timed out"); absent when serving */
  reason?: string;
}

export interface ReadinessAnswer {
  status: "SERVING" | "NOT_SERVING";
  checks: CheckResult[];
}

/** The name of the check that fails once a shutdown began. */
export const SHUTDOWN_CHECK = "shutdown";

export class Readiness {
  #shuttingDown = false;
  /** one evaluation answers every probe that arrives while it runs */
  #evaluating?: Promise<ReadinessAnswer>;
  /** checks failing at the last evaluation: a change is logged once, not at every probe */
  readonly #failing = new Set<string>();

  constructor(
    private readonly checks: readonly ReadinessCheck[],
    private readonly logger: Logger,
    private readonly timeoutMs = CHECK_TIMEOUT_MS,
  ) {}

  /** From now on /readyz answers 503 (a shutdown began); nothing else is asked any more. */
  shutDown(): void {
    this.#shuttingDown = true;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  answer(): Promise<ReadinessAnswer> {
    // Checks may use what a shutdown is closing: once it began, they are not run.
    if (this.#shuttingDown)
      return Promise.resolve({
        status: "NOT_SERVING",
        checks: [{ name: SHUTDOWN_CHECK, status: "NOT_SERVING", reason: "shutting down" }],
      });
    return (this.#evaluating ??= this.#evaluate().finally(() => (this.#evaluating = undefined)));
  }

  async #evaluate(): Promise<ReadinessAnswer> {
    const checks = await Promise.all(this.checks.map((check) => this.#run(check)));
    checks.push(
      this.#shuttingDown
        ? { name: SHUTDOWN_CHECK, status: "NOT_SERVING", reason: "shutting down" }
        : { name: SHUTDOWN_CHECK, status: "SERVING" },
    );
    return { status: checks.every((c) => c.status === "SERVING") ? "SERVING" : "NOT_SERVING", checks };
  }

  async #run(check: ReadinessCheck): Promise<CheckResult> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        check.run(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new NotReady("timed out", new Error(`no answer in ${this.timeoutMs} ms`))),
            this.timeoutMs,
          );
        }),
      ]);
      if (this.#failing.delete(check.name)) this.logger.info({ check: check.name }, "readiness check passes again");
      return { name: check.name, status: "SERVING" };
    } catch (err) {
      const reason = err instanceof NotReady ? err.reason : "failed";
      if (!this.#failing.has(check.name)) {
        this.#failing.add(check.name);
        this.logger.warn(
          { check: check.name, reason, err: err instanceof NotReady ? err.cause : err },
          "readiness check failed: /readyz answers 503",
        );
      }
      return { name: check.name, status: "NOT_SERVING", reason };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** GET /livez and /readyz: anonymous, outside the rate limits (probes must not be refused), never cached. */
export function registerHealthRoutes(fastify: FastifyInstance, readiness: Readiness): void {
  fastify.get("/livez", async (_request, reply) => {
    reply.header("cache-control", "no-store");
    return { status: "SERVING" };
  });
  fastify.get("/readyz", async (request, reply) => {
    const answer = await readiness.answer();
    reply.header("cache-control", "no-store");
    if (answer.status !== "SERVING") {
      // A deliberate answer, not a fault: the failing check was logged when it began to fail.
      outcomeOf(request).level = "info";
      reply.code(503);
    }
    return answer;
  });
}
