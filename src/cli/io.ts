// The process as the CLI sees it: where it writes (stdout, stderr), what it reads (stdin), its
// environment, whether it runs on a terminal, and the exit status a command asks for. Nothing else
// in src/cli reads `process` for these: `main(argv, io)` (program.ts) hands one of these down, the
// executables (main.ts, docker-credential.ts) give it the real process, and tests run the command
// program in-process with their own (test/support/cli.ts).
import type { Command, OutputConfiguration } from "commander";

/** Somewhere text goes: stdout or stderr. */
export interface CliOutput {
  write(text: string): unknown;
  /** a terminal: colors, a progress bar, help wrapped to its width */
  readonly isTTY?: boolean;
  /** a terminal's width */
  readonly columns?: number;
  /** whether a terminal shows colors (Node's WriteStream.hasColors) */
  hasColors?(): boolean;
}

export interface CliInput extends NodeJS.ReadableStream {
  readonly isTTY?: boolean;
}

export interface CliIo {
  readonly stdout: CliOutput;
  readonly stderr: CliOutput;
  readonly stdin: CliInput;
  readonly env: NodeJS.ProcessEnv;
  /** the status to exit with when the command ends without an error (unset: 0), e.g. 1 when an import skipped a document */
  exitCode: number | undefined;
  /**
   * Aborted when the user asks a command that runs until stopped (`audit list --follow`) to stop
   * (Ctrl-C). Only such a command calls it, so every other keeps SIGINT's default (the process ends).
   */
  interrupted?(): AbortSignal;
}

/** The real process (its streams are read only when used; the exit code is process.exitCode). */
export function processIo(): CliIo {
  return {
    get stdout() {
      return process.stdout;
    },
    get stderr() {
      return process.stderr;
    },
    get stdin() {
      return process.stdin;
    },
    get env() {
      return process.env;
    },
    get exitCode() {
      return typeof process.exitCode === "number" ? process.exitCode : undefined;
    },
    set exitCode(code: number | undefined) {
      process.exitCode = code;
    },
    interrupted() {
      // once: a second Ctrl-C ends the process the default way, should the command not stop
      const stop = new AbortController();
      process.once("SIGINT", () => stop.abort());
      return stop.signal;
    },
  };
}

const attached = new WeakMap<Command, CliIo>();

/** Makes `io` the one every command under `program` runs with (buildCli does this). */
export function attachIo(program: Command, io: CliIo): void {
  attached.set(program, io);
}

/** The io a command runs with: its program's, or the real process for a tree built without one. */
export function ioOf(command: Command): CliIo {
  for (let c: Command | null = command; c; c = c.parent) {
    const io = attached.get(c);
    if (io) return io;
  }
  return processIo();
}

/** NO_COLOR / FORCE_COLOR / CLICOLOR_FORCE as commander reads them (undefined: it depends on the terminal). */
function commanderColor(env: NodeJS.ProcessEnv): boolean | undefined {
  if (env.NO_COLOR || env.FORCE_COLOR === "0" || env.FORCE_COLOR === "false") return false;
  if (env.FORCE_COLOR || env.CLICOLOR_FORCE !== undefined) return true;
  return undefined;
}

/** commander's output (help, usage errors, --version) through `io`, with commander's own rules for width and color. */
export function commanderOutput(io: CliIo): OutputConfiguration {
  // Off a terminal commander's own default width is undefined too (it then wraps at 80); its typings say number.
  const width = (out: CliOutput) => (out.isTTY ? out.columns : undefined) as number;
  return {
    writeOut: (text) => void io.stdout.write(text),
    writeErr: (text) => void io.stderr.write(text),
    getOutHelpWidth: () => width(io.stdout),
    getErrHelpWidth: () => width(io.stderr),
    getOutHasColors: () => commanderColor(io.env) ?? (io.stdout.isTTY === true && io.stdout.hasColors?.() === true),
    getErrHasColors: () => commanderColor(io.env) ?? (io.stderr.isTTY === true && io.stderr.hasColors?.() === true),
  };
}
