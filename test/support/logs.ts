// A server's log, captured in memory: the lines its logger writes, parsed, and a wait for the
// first line that matches (logging happens once the answer is out, so a test that has its answer
// may not have the line yet).
import { pino, type Logger } from "pino";
import { until } from "./wait.js";

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** pino's numeric levels. */
export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

export interface CapturedLog {
  /** give this to startTestServer({ logger }) */
  logger: Logger;
  lines(): readonly LogLine[];
  /** the first line for which `match` holds, once written */
  waitFor(match: (line: LogLine) => boolean, what: string): Promise<LogLine>;
}

export function captureLog(level: keyof typeof LEVEL = "debug"): CapturedLog {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (text: string) => void lines.push(JSON.parse(text) as LogLine) });
  return {
    logger,
    lines: () => lines,
    waitFor: (match, what) =>
      until(
        () => lines.find(match),
        () => `log line: ${what}; the log:\n${lines.map((l) => JSON.stringify(l)).join("\n")}`,
      ),
  };
}
