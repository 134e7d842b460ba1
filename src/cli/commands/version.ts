// `bulwark version`: the CLI's version and, when it answers, the server's.
import type { Command } from "commander";
import { examples, connectionOptions } from "../command.js";
import { ioOf } from "../io.js";
import { Printer } from "../output.js";
import { Session, type ClientFlags } from "../session.js";

export function registerVersion(program: Command, version: string): void {
  examples(
    connectionOptions(program.command("version"))
      .description("print the CLI's version, and the server's when it can be reached")
      .option("--client", "the CLI's version only (no network)"),
    ["bulwark version", "bulwark version --client", "bulwark version -o json"],
  ).action(async (opts: ClientFlags & { client?: boolean }, command: Command) => {
    const io = ioOf(command);
    const session = await Session.open(opts, io.env);
    const print = new Printer(session.output, io);
    let server: { url: string; version?: string; error?: string } | undefined;
    if (!opts.client) {
      try {
        const res = await fetch(new URL("/healthz", session.apiUrl), { signal: AbortSignal.timeout(5_000) });
        const body = (await res.json().catch(() => ({}))) as { version?: unknown };
        server = { url: session.apiUrl, version: typeof body.version === "string" ? body.version : undefined };
      } catch (err) {
        const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
        server = { url: session.apiUrl, error: `not reachable (${cause})` };
      }
    }
    print.done(
      [
        `client: bulwark ${version}`,
        ...(server
          ? [
              `server: ${server.url} ${server.version ? `bulwark ${server.version}` : (server.error ?? "version unknown")}`,
            ]
          : []),
      ].join("\n"),
      { id: version, json: { client: version, ...(server ? { server } : {}) } },
    );
  });
}
