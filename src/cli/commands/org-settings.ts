// TODO(helper): being written.
import type { Command } from "commander";

export function registerOrgSettings(_iam: Command): void {}
