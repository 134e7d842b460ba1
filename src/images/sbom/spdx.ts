// SPDX 2.3 JSON from an image's inventory: one package for the image, which the document
// DESCRIBES and which CONTAINS one package per installed package (with its purl).
import { VERSION } from "../../core/version.js";
import type { InstalledPackage, Inventory } from "../inventory/types.js";
import {
  documentUrl,
  imageReference,
  ociPurl,
  sbomTimestamp,
  spdxLicenseExpression,
  type SbomSubject,
} from "./subject.js";

export const SPDX_MEDIA_TYPE = "application/spdx+json";
export const SPDX_FORMAT = "spdx-2.3";
export const SBOM_TOOL = `bulwark-${VERSION}`;

const NOASSERTION = "NOASSERTION";
export const IMAGE_SPDX_ID = "SPDXRef-Image";

export interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  supplier: string;
  downloadLocation: string;
  filesAnalyzed: false;
  licenseConcluded: string;
  licenseDeclared: string;
  copyrightText: string;
  primaryPackagePurpose?: string;
  sourceInfo?: string;
  checksums?: { algorithm: string; checksumValue: string }[];
  externalRefs: { referenceCategory: string; referenceType: string; referenceLocator: string }[];
}

export interface SpdxRelationship {
  spdxElementId: string;
  relationshipType: "DESCRIBES" | "CONTAINS";
  relatedSpdxElement: string;
}

export interface SpdxDocument {
  spdxVersion: "SPDX-2.3";
  dataLicense: "CC0-1.0";
  SPDXID: "SPDXRef-DOCUMENT";
  name: string;
  documentNamespace: string;
  creationInfo: { created: string; creators: string[] };
  packages: SpdxPackage[];
  relationships: SpdxRelationship[];
}

/** An SPDX id for the i-th package: unique by its index, readable by its name ([A-Za-z0-9.-] only). */
export function packageSpdxId(index: number, pkg: InstalledPackage): string {
  return `SPDXRef-Package-${pkg.type.replace(/[^A-Za-z0-9.-]/g, "-")}-${pkg.name.replace(/[^A-Za-z0-9.-]/g, "-")}-${index}`;
}

export function spdxOf(subject: SbomSubject, inventory: Inventory): SpdxDocument {
  const hex = subject.digest.startsWith("sha256:") ? subject.digest.slice("sha256:".length) : undefined;
  const image: SpdxPackage = {
    SPDXID: IMAGE_SPDX_ID,
    name: subject.repoName,
    versionInfo: subject.digest,
    supplier: NOASSERTION,
    downloadLocation: NOASSERTION,
    filesAnalyzed: false,
    licenseConcluded: NOASSERTION,
    licenseDeclared: NOASSERTION,
    copyrightText: NOASSERTION,
    primaryPackagePurpose: "CONTAINER",
    ...(hex ? { checksums: [{ algorithm: "SHA256", checksumValue: hex }] } : {}),
    externalRefs: [
      { referenceCategory: "PACKAGE-MANAGER", referenceType: "purl", referenceLocator: ociPurl(subject, inventory) },
    ],
  };
  const packages = inventory.packages.map((pkg, i): SpdxPackage => ({
    SPDXID: packageSpdxId(i, pkg),
    name: pkg.name,
    versionInfo: pkg.version,
    supplier: NOASSERTION,
    downloadLocation: NOASSERTION,
    filesAnalyzed: false,
    licenseConcluded: NOASSERTION,
    licenseDeclared: spdxLicenseExpression(pkg.license) ?? NOASSERTION,
    copyrightText: NOASSERTION,
    primaryPackagePurpose: "LIBRARY",
    ...(pkg.origin && pkg.origin !== pkg.name ? { sourceInfo: `built from the source package ${pkg.origin}` } : {}),
    externalRefs: pkg.purl
      ? [{ referenceCategory: "PACKAGE-MANAGER", referenceType: "purl", referenceLocator: pkg.purl }]
      : [],
  }));
  return {
    spdxVersion: "SPDX-2.3",
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name: imageReference(subject),
    documentNamespace: documentUrl(subject, "spdx"),
    creationInfo: { created: sbomTimestamp(subject.indexTime), creators: [`Tool: ${SBOM_TOOL}`] },
    packages: [image, ...packages],
    relationships: [
      { spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES", relatedSpdxElement: IMAGE_SPDX_ID },
      ...packages.map((p): SpdxRelationship => ({
        spdxElementId: IMAGE_SPDX_ID,
        relationshipType: "CONTAINS",
        relatedSpdxElement: p.SPDXID,
      })),
    ],
  };
}
