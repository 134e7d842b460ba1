// The SBOM writers against the official JSON schemas (SPDX 2.3 from the SPDX specification,
// CycloneDX 1.5 from the CycloneDX specification; test/fixtures/sbom-schemas/README.md says
// where each came from), and what the documents say about a wolfi and a Debian inventory.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Inventory, InstalledPackage } from "../../src/images/inventory/types.js";
import { spdxOf } from "../../src/images/sbom/spdx.js";
import { cyclonedxOf } from "../../src/images/sbom/cyclonedx.js";
import { uuidV5, type SbomSubject } from "../../src/images/sbom/subject.js";
import { assertValid, validCycloneDx, validSpdx } from "../support/sbom-schemas.js";

const apk = (name: string, version: string, origin: string, license: string): InstalledPackage => ({
  type: "apk",
  name,
  version,
  arch: "x86_64",
  origin,
  license,
  purl: `pkg:apk/wolfi/${name}@${version}?arch=x86_64`,
});

const WOLFI: Inventory = {
  os: "linux",
  architecture: "amd64",
  variant: "",
  created: new Date("2024-05-01T10:00:00Z"),
  config: { Env: ["PATH=/usr/bin"] },
  sizeCompressed: 1234,
  sizeUncompressed: 5678,
  packageSource: "apk",
  distro: "wolfi",
  distroVersion: "20230201",
  packages: [
    apk("ca-certificates-bundle", "20240315-r1", "ca-certificates", "MPL-2.0 AND MIT"),
    apk("glibc", "2.39-r5", "glibc", "LGPL-2.1-or-later"),
    apk("libcrypto3", "3.3.0-r8", "openssl", "Apache-2.0"),
    apk("busybox", "1.36.1-r7", "busybox", "GPL-2.0-only"),
    apk("wolfi-baselayout", "20230201-r11", "wolfi-baselayout", "MIT"),
    apk("linux-headers", "6.8-r0", "linux", "GPL-2.0-only WITH Linux-syscall-note"),
    apk("vendor-tool", "1.0-r0", "vendor-tool", "Some Vendor Licence v2"),
    apk("ref-licensed", "1.0-r0", "ref-licensed", "MIT AND LicenseRef-custom"),
    apk("unlicensed", "0.1-r0", "unlicensed", ""),
  ],
};

const DEBIAN: Inventory = {
  ...WOLFI,
  architecture: "arm",
  variant: "v7",
  packageSource: "dpkg",
  distro: "debian",
  distroVersion: "12",
  packages: [
    {
      type: "deb",
      name: "libssl3",
      version: "3.0.11-1~deb12u2",
      arch: "armhf",
      origin: "openssl",
      license: "",
      purl: "pkg:deb/debian/libssl3@3.0.11-1~deb12u2?arch=armhf&distro=debian-12",
    },
    {
      type: "deb",
      name: "base-files",
      version: "12.4+deb12u5",
      arch: "armhf",
      origin: "base-files",
      license: "",
      purl: "pkg:deb/debian/base-files@12.4%2Bdeb12u5?arch=armhf&distro=debian-12",
    },
  ],
};

const DIGEST = `sha256:${"ab".repeat(32)}`;
const SUBJECT: SbomSubject = {
  repoName: "acme/team/app",
  registryHost: "registry.example.com:5000",
  digest: DIGEST,
  apiBase: "https://api.example.com",
  indexTime: new Date("2024-06-01T12:34:56.789Z"),
};

describe("SPDX 2.3", () => {
  it("is valid against the official schema, for a wolfi and a Debian image", () => {
    assertValid(validSpdx, spdxOf(SUBJECT, WOLFI));
    assertValid(validSpdx, spdxOf(SUBJECT, DEBIAN));
    assertValid(validSpdx, spdxOf(SUBJECT, { ...WOLFI, packages: [] }));
  });

  it("the schema check is real: a document without its version or with a bad relationship fails", () => {
    const { spdxVersion: _, ...noVersion } = spdxOf(SUBJECT, WOLFI);
    assert.equal(validSpdx(noVersion), false);
    const bad = spdxOf(SUBJECT, WOLFI) as unknown as { relationships: { relationshipType: string }[] };
    bad.relationships[0]!.relationshipType = "OWNS";
    assert.equal(validSpdx(bad), false);
  });

  it("describes the image, which contains every package with its purl and declared license", () => {
    const doc = spdxOf(SUBJECT, WOLFI);
    assert.equal(doc.spdxVersion, "SPDX-2.3");
    assert.equal(doc.dataLicense, "CC0-1.0");
    assert.equal(doc.creationInfo.created, "2024-06-01T12:34:56Z");
    assert.match(doc.creationInfo.creators[0]!, /^Tool: bulwark-\d+\.\d+\.\d+/);
    assert.equal(doc.documentNamespace, `https://api.example.com/sbom/spdx/acme/team/app/sha256%3A${"ab".repeat(32)}`);
    const [image, ...packages] = doc.packages;
    assert.equal(image!.primaryPackagePurpose, "CONTAINER");
    assert.deepEqual(
      image!.externalRefs[0]!.referenceLocator,
      `pkg:oci/app@sha256%3A${"ab".repeat(32)}?arch=amd64&repository_url=registry.example.com:5000/acme/team/app`,
    );
    assert.deepEqual(image!.checksums, [{ algorithm: "SHA256", checksumValue: "ab".repeat(32) }]);
    assert.deepEqual(
      doc.relationships.filter((r) => r.relationshipType === "DESCRIBES"),
      [{ spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES", relatedSpdxElement: image!.SPDXID }],
    );
    const contained = doc.relationships.filter((r) => r.relationshipType === "CONTAINS");
    assert.deepEqual(
      contained.map((r) => r.spdxElementId),
      packages.map(() => image!.SPDXID),
    );
    assert.deepEqual(
      contained.map((r) => r.relatedSpdxElement),
      packages.map((p) => p.SPDXID),
    );
    assert.equal(new Set(doc.packages.map((p) => p.SPDXID)).size, doc.packages.length);
    assert.deepEqual(
      packages.map((p) => [p.name, p.versionInfo, p.externalRefs[0]?.referenceLocator, p.licenseDeclared]),
      WOLFI.packages
        .map((p) => [p.name, p.version, p.purl, p.license])
        .map(([n, v, purl, l]) => [
          n,
          v,
          purl,
          // valid SPDX expressions of listed licenses are declared; anything else is NOASSERTION
          ["Some Vendor Licence v2", "MIT AND LicenseRef-custom", ""].includes(l!) ? "NOASSERTION" : l,
        ]),
    );
    // a subpackage names its origin
    assert.equal(packages.find((p) => p.name === "libcrypto3")!.sourceInfo, "built from the source package openssl");
    assert.equal(packages.find((p) => p.name === "glibc")!.sourceInfo, undefined);
  });

  it("names the variant in the image's arch, and keeps Debian purls", () => {
    const doc = spdxOf({ ...SUBJECT, tag: "1.2" }, DEBIAN);
    assert.match(doc.packages[0]!.externalRefs[0]!.referenceLocator, /\?arch=arm\/v7&repository_url=.*&tag=1\.2$/);
    assert.equal(doc.packages[1]!.externalRefs[0]!.referenceLocator, DEBIAN.packages[0]!.purl);
  });

  it("is the same document every time, and another digest gets another namespace", () => {
    assert.deepEqual(spdxOf(SUBJECT, WOLFI), spdxOf(SUBJECT, WOLFI));
    const other = spdxOf({ ...SUBJECT, digest: `sha256:${"cd".repeat(32)}` }, WOLFI);
    assert.notEqual(other.documentNamespace, spdxOf(SUBJECT, WOLFI).documentNamespace);
  });
});

describe("CycloneDX 1.5", () => {
  it("is valid against the official schema, for a wolfi and a Debian image", () => {
    assertValid(validCycloneDx, cyclonedxOf(SUBJECT, WOLFI));
    assertValid(validCycloneDx, cyclonedxOf(SUBJECT, DEBIAN));
    assertValid(validCycloneDx, cyclonedxOf(SUBJECT, { ...WOLFI, packages: [] }));
  });

  it("the schema check is real: a bad serial number or component type fails", () => {
    assert.equal(validCycloneDx({ ...cyclonedxOf(SUBJECT, WOLFI), serialNumber: "not-a-urn" }), false);
    const bad = cyclonedxOf(SUBJECT, WOLFI) as unknown as { components: { type: string }[] };
    bad.components[0]!.type = "vegetable";
    assert.equal(validCycloneDx(bad), false);
  });

  it("has the image as a container depending on a library component per package", () => {
    const bom = cyclonedxOf(SUBJECT, WOLFI);
    assert.equal(bom.metadata.component.type, "container");
    assert.equal(bom.metadata.timestamp, "2024-06-01T12:34:56Z");
    assert.deepEqual(
      bom.components.map((c) => [c.type, c.name, c.version, c.purl]),
      WOLFI.packages.map((p) => ["library", p.name, p.version, p.purl]),
    );
    assert.deepEqual(bom.components.find((c) => c.name === "ca-certificates-bundle")!.licenses, [
      { expression: "MPL-2.0 AND MIT" },
    ]);
    assert.deepEqual(bom.components.find((c) => c.name === "vendor-tool")!.licenses, [
      { license: { name: "Some Vendor Licence v2" } },
    ]);
    assert.equal(bom.components.find((c) => c.name === "unlicensed")!.licenses, undefined);
    const image = bom.dependencies.find((d) => d.ref === bom.metadata.component["bom-ref"])!;
    assert.deepEqual(
      image.dependsOn,
      bom.components.map((c) => c["bom-ref"]),
    );
  });

  it("keeps bom-refs unique when two packages share a purl", () => {
    const twice = { ...WOLFI, packages: [WOLFI.packages[0]!, WOLFI.packages[0]!] };
    const bom = cyclonedxOf(SUBJECT, twice);
    assertValid(validCycloneDx, bom);
    assert.equal(new Set(bom.components.map((c) => c["bom-ref"])).size, 2);
  });

  it("has a serial number that is a version 5 UUID of the image: stable, and another per digest", () => {
    const a = cyclonedxOf(SUBJECT, WOLFI).serialNumber;
    assert.match(a, /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(cyclonedxOf(SUBJECT, WOLFI).serialNumber, a);
    assert.notEqual(cyclonedxOf({ ...SUBJECT, digest: `sha256:${"cd".repeat(32)}` }, WOLFI).serialNumber, a);
  });

  it("computes version 5 UUIDs as RFC 9562 does (its test vector)", () => {
    // RFC 9562 appendix A.4: the DNS namespace and "www.example.com"
    assert.equal(
      uuidV5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "www.example.com"),
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
  });
});
