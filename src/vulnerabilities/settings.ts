// The vulnerabilities module's settings (its `moduleSettings`: `bulwark serve --public-advisories`)
// and the grants they make every authenticated caller hold (its `sharedGrants`).
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import type { SharedGrant } from "../platform/config.js";

export interface AdvisorySettings {
  /**
   * Groups whose advisories every authenticated caller may read (`--public-advisories`); the
   * first is where imports without a group go. The module turns these into shared grants.
   */
  publicGroups: readonly string[];
}

/** Reading the public advisory groups' advisories, for every authenticated caller. */
export function advisorySharedGrants(settings: Readonly<AdvisorySettings> | undefined): SharedGrant[] {
  return (settings?.publicGroups ?? []).map((group) => ({
    group,
    capabilities: [Capability.CAP_ADVISORIES_LIST],
  }));
}
