// Runs the modules' periodic tasks while the server runs. A run never overlaps the previous run
// of the same task (the next is scheduled when one ends: a collection slower than its interval
// waits instead of piling up), a failure is logged and the schedule goes on, and `stop` waits for
// runs in progress, so the server closes the database only after its last task used it.
import type { Logger } from "pino";
import type { PeriodicTask } from "../platform/module.js";

export class PeriodicTasks {
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #running = new Set<Promise<void>>();
  #stopped = false;

  constructor(private readonly logger: Logger) {}

  /** Runs `task` every `task.everyMs` (counted from the end of its previous run) until stopped. */
  schedule(module: string, task: PeriodicTask): void {
    const next = () => {
      if (this.#stopped) return;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        if (this.#stopped) return;
        const run = task
          .run()
          .catch((err) => this.logger.error({ err, module, task: task.name }, "periodic task failed"))
          .finally(() => {
            this.#running.delete(run);
            next();
          });
        this.#running.add(run);
      }, task.everyMs);
      // A schedule alone does not keep the process alive.
      timer.unref();
      this.#timers.add(timer);
    };
    next();
  }

  /** No new runs; resolves when every run in progress has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.#running]);
  }
}
