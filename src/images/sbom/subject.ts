// What the SBOM writers (spdx.ts, cyclonedx.ts) share: the image an SBOM describes, its purl,
// the name an SBOM document is known by, and which license strings an SBOM may declare as such.
import { createHash } from "node:crypto";
import parseSpdxExpression from "spdx-expression-parse";
import type { Inventory } from "../inventory/types.js";

/** The image an SBOM is about: one image manifest as one repo holds it. */
export interface SbomSubject {
  /** the repo's path under the registry host ("acme/team/app") */
  repoName: string;
  /** the registry's host ("registry.example.com:5000") */
  registryHost: string;
  /** the image manifest's digest ("sha256:…") */
  digest: string;
  /** the API's base URL: documents are named under it */
  apiBase: string;
  /** when the inventory was read: the SBOM's creation time (the same SBOM every time it is asked for) */
  indexTime: Date;
  /** the tag the image was asked for by, if any */
  tag?: string;
}

/** The platform as OCI writes it ("amd64", "arm64/v8" → "arm64", variant kept: "arm/v7"). */
export function platformArch(inventory: Inventory): string {
  return inventory.variant ? `${inventory.architecture}/${inventory.variant}` : inventory.architecture;
}

/**
 * The image's package URL (purl spec, type oci): the repo's last path segment as the name, the
 * digest as the version, the full repository and the platform as qualifiers (sorted by key, values
 * percent-encoded but for '/' and ':', as the spec's own examples write them).
 */
export function ociPurl(subject: SbomSubject, inventory: Inventory): string {
  const name = subject.repoName.split("/").at(-1)!.toLowerCase();
  const qualifiers: [string, string][] = [
    ["arch", platformArch(inventory)],
    ["repository_url", `${subject.registryHost}/${subject.repoName}`],
    ...(subject.tag ? ([["tag", subject.tag]] as [string, string][]) : []),
  ];
  const encode = (v: string) => encodeURIComponent(v).replaceAll("%2F", "/").replaceAll("%3A", ":");
  const query = qualifiers
    .filter(([, v]) => v !== "")
    .map(([k, v]) => `${k}=${encode(v)}`)
    .join("&");
  return `pkg:oci/${encodeURIComponent(name)}@${encodeURIComponent(subject.digest)}${query ? `?${query}` : ""}`;
}

/** The image as people name it: host/repo@digest. */
export function imageReference(subject: SbomSubject): string {
  return `${subject.registryHost}/${subject.repoName}@${subject.digest}`;
}

/**
 * The URL an SBOM document of `format` is named by: under the API's base, by repo and digest, so
 * the same image in the same repo always gets the same name, and no two images share one.
 */
export function documentUrl(subject: SbomSubject, format: "spdx" | "cyclonedx"): string {
  const base = subject.apiBase.endsWith("/") ? subject.apiBase : `${subject.apiBase}/`;
  const repo = subject.repoName.split("/").map(encodeURIComponent).join("/");
  return new URL(`sbom/${format}/${repo}/${encodeURIComponent(subject.digest)}`, base).href;
}

/**
 * A license string as an SBOM may declare it: the string when it is a valid SPDX license
 * expression of listed licenses (apk's `L:` usually is), else undefined. Expressions naming a
 * `LicenseRef-` are left out too: a document would have to define them.
 */
export function spdxLicenseExpression(license: string): string | undefined {
  const text = license.trim();
  if (!text || /LicenseRef-/i.test(text)) return undefined;
  try {
    parseSpdxExpression(text);
    return text;
  } catch {
    return undefined;
  }
}

/** RFC 9562's namespace for names that are URLs. */
export const URL_NAMESPACE = "6ba7b811-9dad-11d1-80b4-00c04fd430c8";

/**
 * A name-based UUID (RFC 9562 version 5: SHA-1 of the namespace and the name): the same name
 * always gives the same UUID, so an SBOM's serial number is stable across requests.
 */
export function uuidV5(namespace: string, name: string): string {
  const hash = createHash("sha1")
    .update(Buffer.from(namespace.replaceAll("-", ""), "hex"))
    .update(name, "utf8")
    .digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50; // version 5
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC variant
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The SBOM's creation time as both formats write it: UTC to the second. */
export function sbomTimestamp(time: Date): string {
  return time.toISOString().replace(/\.\d{3}Z$/, "Z");
}
