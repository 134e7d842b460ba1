// TODO(helper): being written.
import type { Command } from "commander";

export function registerIdentities(_iam: Command): void {}
