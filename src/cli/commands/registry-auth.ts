// TODO(helper): being written.
import type { Command } from "commander";

export function registerRegistryAuth(_auth: Command): void {}
