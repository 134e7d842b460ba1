// TODO(helper): being written.
import type { Command } from "commander";

export function registerInvites(_iam: Command): void {}
