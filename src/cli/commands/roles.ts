// TODO(helper): being written.
import type { Command } from "commander";

export function registerRoles(_iam: Command): void {}
