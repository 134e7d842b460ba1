// What an image holds, as the tables keep it: the shapes the inventory reader produces and the
// images tables store. Here, under storage/, so the tables' types can name them (a feature's
// storage imports no service code); inventory/types.ts re-exports them as the lanes' contract.

/** One installed package. */
export interface InstalledPackage {
  /** "apk" or "deb"; for packages an attached SBOM names, the purl type it gave */
  type: string;
  name: string;
  version: string;
  /** apk `A:` / dpkg `Architecture:` ("x86_64", "amd64"); "" when unknown */
  arch: string;
  /** the source package (apk `o:`, dpkg `Source:` without its version); the name when none */
  origin: string;
  /** apk `L:` / an SBOM's license; "" when unknown (dpkg status has none) */
  license: string;
  /** pkg:apk/<distro>/<name>@<version>?arch=<arch>, pkg:deb/<distro>/<name>@<version>?arch=<arch> */
  purl: string;
}

/** Where an inventory's packages came from. */
export type PackageSource = "apk" | "dpkg" | "apk+dpkg" | "sbom:spdx" | "sbom:cyclonedx" | "";

/** The config fields the API shows (chainguard.platform.registry.ImageConfig). */
export interface ImageRuntimeConfig {
  User?: string;
  ExposedPorts?: Record<string, object>;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  Volumes?: Record<string, object>;
  WorkingDir?: string;
  Labels?: Record<string, string>;
  StopSignal?: string;
}

/** What reading one image manifest (its config, then its layers or its SBOM) found. */
export interface Inventory {
  os: string;
  architecture: string;
  variant: string;
  /** the config's `created`, when it has a valid one */
  created?: Date;
  config: ImageRuntimeConfig;
  /** config + layers as stored */
  sizeCompressed: number;
  /** the layers once decompressed (0 when the packages came from an SBOM and no layer was read) */
  sizeUncompressed: number;
  packageSource: PackageSource;
  /** /etc/os-release ID and VERSION_ID ("wolfi", "debian" / "12"); "" when absent */
  distro: string;
  distroVersion: string;
  packages: InstalledPackage[];
}
