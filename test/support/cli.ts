// Runs `bulwark` in a private config dir against a test server; what it printed and its exit
// status. `runCli` runs the command program in this process (src/cli/program.ts `main`, on an io of
// its own: the same commands, settings, clients and exit codes as the binary, without a Node start
// per command); `runCliProcess` spawns the real binary (bin/bulwark.js over the build the test run
// prepared), for the smoke tier and for what needs a process: a terminal, stdin as a pipe, the
// docker credential helper, the server commands.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import type { CliIo, CliOutput } from "../../src/cli/io.js";
import { main } from "../../src/cli/program.js";
import { watchOutput } from "./wait.js";
import { CLI_ARGS, isBulwarkSetting } from "./paths.js";

export const BIN = join(process.cwd(), "bin", "bulwark.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** environment on top of a clean one (PATH, HOME and the config dir); undefined removes a variable */
  env?: Record<string, string | undefined>;
  /** written to stdin, which is then closed */
  input?: string;
  /** another executable under bin/ (docker-credential-bulwark): always spawned */
  bin?: string;
  /** run this command line instead of the CLI (the terminal wrapper): always spawned */
  command?: string[];
}

/** A private home for the CLI's config and credentials; `close()` removes it. */
export class CliHome {
  readonly dir = mkdtempSync(join(tmpdir(), "bulwark-cli-home-"));
  get configDir(): string {
    return join(this.dir, "config");
  }
  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The environment a run gets: the test process's without any BULWARK_* setting (isBulwarkSetting;
 * nor NO_COLOR, FORCE_COLOR), HOME and BULWARK_CONFIG_DIR in `home`, then what `env` gives.
 */
function cliEnv(home: CliHome, options: CliOptions): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !isBulwarkSetting(k) && k !== "NO_COLOR" && k !== "FORCE_COLOR") base[k] = v;
  const env: Record<string, string> = { ...base, HOME: home.dir, BULWARK_CONFIG_DIR: home.configDir };
  for (const [k, v] of Object.entries(options.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** What a run printed on one of its streams: not a terminal, as when the binary's output is piped. */
class Captured implements CliOutput {
  text = "";
  readonly isTTY = false;
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

/**
 * Runs `bulwark <args>` in this process (with `bin` or `command`, spawns them: runCliProcess). The
 * environment holds no BULWARK_* variable of the developer's shell: only what `env` gives, plus
 * BULWARK_CONFIG_DIR in `home`; stdout and stderr are not terminals, stdin holds `input`.
 */
export async function runCli(home: CliHome, args: string[], options: CliOptions = {}): Promise<CliResult> {
  if (options.bin !== undefined || options.command !== undefined) return runCliProcess(home, args, options);
  const stdout = new Captured();
  const stderr = new Captured();
  const io: CliIo = {
    stdout,
    stderr,
    stdin: Readable.from(options.input ? [Buffer.from(options.input)] : [], { objectMode: false }), // bytes, as a pipe
    env: cliEnv(home, options),
    exitCode: undefined,
  };
  const code = await main([process.execPath, BIN, ...args], io);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** Runs `bulwark <args>` as the real binary in a child process (same environment as runCli). */
export async function runCliProcess(home: CliHome, args: string[], options: CliOptions = {}): Promise<CliResult> {
  const env = cliEnv(home, options);
  const [file, ...argv] = options.command ?? [
    process.execPath,
    options.bin ? join(process.cwd(), "bin", options.bin) : BIN,
    ...args,
  ];
  const child = spawn(file!, argv, { stdio: ["pipe", "pipe", "pipe"], env });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  // A command that never reads stdin may exit before the input is written (EPIPE): not a failure.
  child.stdin.on("error", () => {});
  child.stdin.end(options.input ?? "");
  // "close", not "exit": the exit can come before the last of stdout was read
  const [code] = (await once(child, "close")) as [number | null];
  return { code: code ?? -1, stdout, stderr };
}

/**
 * Runs `bulwark <args>` on a pseudo-terminal (util-linux `script`), as a person at a terminal
 * would: stdout and stderr arrive together, with whatever the CLI draws only on a terminal.
 */
export async function runCliOnTerminal(home: CliHome, args: string[], options: CliOptions = {}): Promise<CliResult> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, BIN, ...args].map(quote).join(" ");
  return runCliProcess(home, [], { ...options, command: ["script", "-qec", command, "/dev/null"] });
}

/** The child's exit status (its signal's name if a signal ended it), also when it has already exited. */
export async function exited(child: ChildProcess): Promise<number | NodeJS.Signals> {
  if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
  return child.exitCode ?? child.signalCode!;
}

/** A running `bulwark serve`, once it said where it listens. */
export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** with --registry-port */
  registryPort?: string;
  /** what it printed up to and including the ready line (stdout's lines, stderr's chunks) */
  lines: string[];
  /** SIGTERM (unless it has exited), then its exit */
  stop(): Promise<number | NodeJS.Signals>;
}

/** How long a server may take to say it listens: only to bound a hang (it takes about a second). */
const READY_CEILING_MS = 120_000;

/**
 * Starts `bulwark serve <args>` (the real binary, environment on top of this process's, no
 * DATABASE_URL) and waits for its "bulwark listening on" log line. When it exits first, or stays
 * silent past a generous ceiling, this fails with what it printed, and the process is gone.
 */
export async function serveProcess(args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, "serve", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "", ...env },
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    return exited(child);
  };
  const lines: string[] = [];
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => lines.push(chunk));
  const stdout = createInterface({ input: child.stdout! });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<ServeProcess>((resolve, reject) => {
      stdout.on("line", (line) => {
        if (!line) return;
        lines.push(line);
        const m = /bulwark listening on (http:\/\/[^"\s]+)(?: \(registry also on port (\d+)\))?/.exec(line);
        if (m) resolve({ child, url: m[1]!, registryPort: m[2], lines, stop });
      });
      child.on("exit", (code, signal) =>
        reject(new Error(`bulwark serve exited (${code ?? signal}) before it was ready:\n${lines.join("\n")}`)),
      );
      timer = setTimeout(
        () => reject(new Error(`bulwark serve not ready in ${READY_CEILING_MS / 1000} s:\n${lines.join("\n")}`)),
        READY_CEILING_MS,
      );
    });
  } catch (err) {
    await stop();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Replaces what changes from run to run (uids, times, tokens) so output can be compared with a
 * snapshot: a uid in `known` becomes `<its name>`, any other uid `<uid>`; other `known` strings
 * become `<their name>`.
 */
export function normalize(text: string, known: Record<string, string> = {}): string {
  let out = text.replace(/\b[0-9a-f]{40}(\/[0-9a-f]{16})*\b/g, (uid) => (known[uid] ? `<${known[uid]}>` : "<uid>"));
  for (const [value, name] of Object.entries(known).sort((a, b) => b[0].length - a[0].length))
    if (!/^[0-9a-f]{40}(\/[0-9a-f]{16})*$/.test(value)) out = out.split(value).join(`<${name}>`);
  return out
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
    .replace(/ey[\w-]+\.[\w-]+\.[\w-]+/g, "<jwt>");
}

/** Column alignment depends on the uids' lengths: compare tables with runs of spaces collapsed. */
export function collapse(text: string): string {
  return text.replace(/ {2,}/g, "  ").replace(/ +\n/g, "\n");
}

/** A CLI process (paths.ts CLI_ARGS), its output watched. */
export interface CliRun {
  child: ChildProcess;
  /** stdout and stderr so far */
  output(): string;
  /** the first match of `re` in stdout and stderr, once written (rejects if the process ends first) */
  waitFor(re: RegExp): Promise<RegExpMatchArray>;
  exit: Promise<number | null>;
}

/**
 * Starts `bulwark <args>` (paths.ts CLI_ARGS: the build in a compiled run) with exactly `env`;
 * `started` collects it, for a suite to stop what a failed test left running.
 */
export function startCli(args: string[], env: NodeJS.ProcessEnv, started: ChildProcess[]): CliRun {
  const child = spawn(process.execPath, [...CLI_ARGS, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  started.push(child);
  const output = watchOutput(child);
  // "close", not "exit": only then has everything the child wrote been read.
  const exit = once(child, "close").then(([code]) => code as number | null);
  return { child, output: output.text, waitFor: output.waitFor, exit };
}
