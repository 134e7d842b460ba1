// TODO(helper): being written.
import type { Command } from "commander";

export function registerImages(_program: Command): void {}
