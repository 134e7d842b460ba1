// CycloneDX 1.5 JSON from an image's inventory: the image as the metadata's component (a
// container), one library component per installed package, and the image depending on each.
import type { Inventory } from "../inventory/types.js";
import {
  documentUrl,
  ociPurl,
  sbomTimestamp,
  spdxLicenseExpression,
  uuidV5,
  URL_NAMESPACE,
  type SbomSubject,
} from "./subject.js";
import { VERSION } from "../../core/version.js";

export const CYCLONEDX_MEDIA_TYPE = "application/vnd.cyclonedx+json";
export const CYCLONEDX_FORMAT = "cyclonedx-1.5";

type Licenses = [{ expression: string }] | { license: { name: string } }[];

export interface CycloneDxComponent {
  type: "container" | "library";
  "bom-ref": string;
  name: string;
  version: string;
  purl?: string;
  licenses?: Licenses;
  properties?: { name: string; value: string }[];
}

export interface CycloneDxDocument {
  bomFormat: "CycloneDX";
  specVersion: "1.5";
  serialNumber: string;
  version: 1;
  metadata: {
    timestamp: string;
    tools: { components: { type: "application"; name: string; version: string }[] };
    component: CycloneDxComponent;
  };
  components: CycloneDxComponent[];
  dependencies: { ref: string; dependsOn: string[] }[];
}

/** An SPDX expression as such; any other license string by name, as the package declared it. */
function licensesOf(license: string): Licenses | undefined {
  const expression = spdxLicenseExpression(license);
  if (expression) return [{ expression }];
  return license.trim() ? [{ license: { name: license.trim() } }] : undefined;
}

export function cyclonedxOf(subject: SbomSubject, inventory: Inventory): CycloneDxDocument {
  const imageRef = ociPurl(subject, inventory);
  const refs = new Set<string>([imageRef]);
  // bom-refs must be unique: the purl, or (two packages with one purl, or none) the purl and a counter
  const uniqueRef = (wanted: string) => {
    let ref = wanted;
    for (let n = 2; refs.has(ref); n++) ref = `${wanted}#${n}`;
    refs.add(ref);
    return ref;
  };
  const components = inventory.packages.map((pkg): CycloneDxComponent => ({
    type: "library",
    "bom-ref": uniqueRef(pkg.purl || `${pkg.type}:${pkg.name}@${pkg.version}`),
    name: pkg.name,
    version: pkg.version,
    ...(pkg.purl ? { purl: pkg.purl } : {}),
    ...(licensesOf(pkg.license) ? { licenses: licensesOf(pkg.license) } : {}),
    ...(pkg.origin && pkg.origin !== pkg.name
      ? { properties: [{ name: "bulwark:package:origin", value: pkg.origin }] }
      : {}),
  }));
  return {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    serialNumber: `urn:uuid:${uuidV5(URL_NAMESPACE, documentUrl(subject, "cyclonedx"))}`,
    version: 1,
    metadata: {
      timestamp: sbomTimestamp(subject.indexTime),
      tools: { components: [{ type: "application", name: "bulwark", version: VERSION }] },
      component: {
        type: "container",
        "bom-ref": imageRef,
        name: subject.repoName,
        version: subject.digest,
        purl: imageRef,
      },
    },
    components,
    dependencies: [
      { ref: imageRef, dependsOn: components.map((c) => c["bom-ref"]) },
      ...components.map((c) => ({ ref: c["bom-ref"], dependsOn: [] })),
    ],
  };
}
