// The packages an SBOM attached to an image names (SPDX 2.x JSON, CycloneDX JSON), read instead of
// the image's layers when present. A document that is not one of these (or not JSON) gives
// undefined, so the reader falls back to the layers; packages without a purl are left out (the
// purl is what says their type, and what matching keys on).
import { parsePurl } from "../storage/purl.js";
import type { InstalledPackage, PackageSource } from "../inventory/types.js";

export interface SbomPackages {
  source: PackageSource;
  packages: InstalledPackage[];
  /** the operating system the SBOM names (its OS package or component), when it names one */
  distro?: { id: string; version: string };
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === "string" ? v.trim() : "");
const NO_LICENSE = new Set(["", "NOASSERTION", "NONE"]);
// Purls of the image itself (the document's subject), never an installed package.
const IMAGE_PURL_TYPES = new Set(["oci", "docker"]);
// Nested CycloneDX components: far beyond any real SBOM, short of a stack overflow.
const MAX_COMPONENT_DEPTH = 32;

function packageOf(purl: string, name: string, version: string, license: string): InstalledPackage | undefined {
  const parsed = parsePurl(purl);
  if (!parsed || IMAGE_PURL_TYPES.has(parsed.type)) return undefined;
  const packageName = name || parsed.name;
  return {
    type: parsed.type,
    name: packageName,
    version: version || parsed.version,
    arch: parsed.qualifiers.arch ?? "",
    origin: parsed.qualifiers.upstream || parsed.qualifiers.origin || packageName,
    license,
    purl: purl.trim(),
  };
}

function spdxPackages(doc: Json): SbomPackages | undefined {
  if (!str(doc.spdxVersion).startsWith("SPDX-2") || !Array.isArray(doc.packages)) return undefined;
  // The document describes the image (its root package): that one is not installed in it.
  const roots = new Set<string>(Array.isArray(doc.documentDescribes) ? doc.documentDescribes.map(str) : []);
  for (const r of Array.isArray(doc.relationships) ? doc.relationships : []) {
    if (isObject(r) && str(r.relationshipType) === "DESCRIBES" && str(r.spdxElementId) === str(doc.SPDXID))
      roots.add(str(r.relatedSpdxElement));
  }
  const packages: InstalledPackage[] = [];
  let distro: SbomPackages["distro"];
  for (const p of doc.packages) {
    if (!isObject(p) || roots.has(str(p.SPDXID))) continue;
    if (str(p.primaryPackagePurpose) === "OPERATING-SYSTEM") {
      distro ??= { id: str(p.name).toLowerCase(), version: str(p.versionInfo) };
      continue;
    }
    const refs = Array.isArray(p.externalRefs) ? p.externalRefs.filter(isObject) : [];
    const purl = refs.find((r) => str(r.referenceType) === "purl");
    if (!purl) continue;
    const concluded = str(p.licenseConcluded);
    const declared = str(p.licenseDeclared);
    const license = !NO_LICENSE.has(concluded) ? concluded : !NO_LICENSE.has(declared) ? declared : "";
    const found = packageOf(str(purl.referenceLocator), str(p.name), str(p.versionInfo), license);
    if (found) packages.push(found);
  }
  return { source: "sbom:spdx", packages, distro };
}

function cyclonedxLicense(licenses: unknown): string {
  if (!Array.isArray(licenses)) return "";
  const parts = licenses.filter(isObject).map((l) => {
    if (str(l.expression)) return str(l.expression);
    const license = isObject(l.license) ? l.license : {};
    return str(license.id) || str(license.name);
  });
  return parts.filter((p) => p !== "").join(" AND ");
}

function cyclonedxPackages(doc: Json): SbomPackages | undefined {
  if (str(doc.bomFormat) !== "CycloneDX") return undefined;
  const packages: InstalledPackage[] = [];
  let distro: SbomPackages["distro"];
  const walk = (components: unknown, depth: number) => {
    if (!Array.isArray(components) || depth > MAX_COMPONENT_DEPTH) return;
    for (const c of components) {
      if (!isObject(c)) continue;
      if (str(c.type) === "operating-system") {
        distro ??= { id: str(c.name).toLowerCase(), version: str(c.version) };
      } else {
        const found = packageOf(str(c.purl), str(c.name), str(c.version), cyclonedxLicense(c.licenses));
        if (found) packages.push(found);
      }
      walk(c.components, depth + 1);
    }
  };
  walk(doc.components ?? [], 0);
  return { source: "sbom:cyclonedx", packages, distro };
}

/**
 * The packages of an SBOM document of `artifactType` (`application/spdx+json`,
 * `application/vnd.cyclonedx+json`, parameters such as `;version=1.5` allowed); undefined when it
 * is neither, or does not parse as one.
 */
export function packagesFromSbom(content: Uint8Array, artifactType: string): SbomPackages | undefined {
  const type = artifactType.split(";")[0]!.trim().toLowerCase();
  if (type !== "application/spdx+json" && type !== "application/vnd.cyclonedx+json") return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(content));
  } catch {
    return undefined;
  }
  if (!isObject(doc)) return undefined;
  return type === "application/spdx+json" ? spdxPackages(doc) : cyclonedxPackages(doc);
}
