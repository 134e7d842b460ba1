// The inventory reader (src/images/inventory/reader.ts) on real image bytes: tar layers packed by
// tar-stream, compressed by the system's gzip and zstd, served by an in-memory ImageSource as the
// registry's store would. What an image's layers leave in its root filesystem (apk and dpkg
// databases, os-release, whiteouts, opaque directories, overrides), attached SBOMs used instead of
// the layers, and every kind of hostile image ending in an InventoryError that says why.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import { readInventoryIsolated, readerThreadsStarted } from "../../src/images/inventory/isolated-read.js";
import { readInventory, type AttachedSbom, type ImageSource } from "../../src/images/inventory/reader.js";
import { InventoryError, type Inventory } from "../../src/images/inventory/types.js";
import {
  apkInstalled,
  digestOf,
  DOCKER_LAYER_GZIP,
  gzipOf,
  imageSource,
  layoutSource,
  LAYER_GZIP,
  LAYER_TAR,
  LAYER_ZSTD,
  rleZstd,
  tarOf,
  zstdOf,
  type LayerEntry,
  type TestImage,
  type TestLayer,
} from "../support/layers.js";
import { HANG_MS } from "../support/wait.js";

// Real Wolfi packages (names, versions, origins and licenses as Wolfi's repository has them).
const WOLFI_PACKAGES = [
  { name: "ca-certificates-bundle", version: "20240705-r0", origin: "ca-certificates", license: "MPL-2.0 AND MIT" },
  { name: "glibc", version: "2.40-r3", license: "LGPL-2.1-or-later" },
  { name: "libcrypto3", version: "3.3.2-r0", origin: "openssl", license: "Apache-2.0" },
  { name: "libssl3", version: "3.3.2-r0", origin: "openssl", license: "Apache-2.0" },
  { name: "wolfi-baselayout", version: "20230201-r15", license: "MIT" },
];
const WOLFI_OS_RELEASE =
  'ID=wolfi\nNAME="Wolfi"\nPRETTY_NAME="Wolfi"\nVERSION_ID="20230201"\nHOME_URL="https://wolfi.dev"\n';

const gzLayer = async (entries: LayerEntry[]): Promise<TestLayer> => ({
  mediaType: LAYER_GZIP,
  bytes: await gzipOf(await tarOf(entries)),
});
const tarLayer = async (entries: LayerEntry[]): Promise<TestLayer> => ({
  mediaType: LAYER_TAR,
  bytes: await tarOf(entries),
});

const read = (image: TestImage, limits?: Parameters<typeof readInventory>[1]) =>
  readInventory(imageSource(image), limits);

async function rejectsWith(image: TestImage, message: RegExp, limits?: Parameters<typeof readInventory>[1]) {
  await assert.rejects(read(image, limits), (error: unknown) => {
    assert.ok(error instanceof InventoryError, `an InventoryError, not ${String(error)}`);
    assert.match(error.message, message);
    return true;
  });
}

const names = (inventory: Inventory) => inventory.packages.map((p) => `${p.name}@${p.version}`).sort();

describe("inventory reader: apk images", () => {
  it("reads a Wolfi image's config, sizes and apk database, subpackages keeping their origin", async () => {
    const base = await gzLayer([
      { name: "etc/", type: "directory" },
      { name: "etc/os-release", content: WOLFI_OS_RELEASE },
      { name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) },
    ]);
    const app = await gzLayer([{ name: "usr/bin/app", content: randomBytes(2000) }]);
    const source = imageSource({ layers: [base, app] });
    const inventory = await readInventory(source);

    assert.equal(inventory.os, "linux");
    assert.equal(inventory.architecture, "amd64");
    assert.equal(inventory.variant, "");
    assert.deepEqual(inventory.created, new Date("2024-05-01T12:00:00Z"));
    assert.deepEqual(inventory.config, {
      User: "65532",
      Env: ["PATH=/usr/bin"],
      Entrypoint: ["/usr/bin/app"],
      Labels: { team: "bulwark" },
    });
    const manifest = JSON.parse(Buffer.from(source.manifest).toString());
    assert.equal(inventory.sizeCompressed, manifest.config.size + base.bytes.length + app.bytes.length);
    assert.equal(inventory.packageSource, "apk");
    assert.equal(inventory.distro, "wolfi");
    assert.equal(inventory.distroVersion, "20230201");

    const libcrypto = inventory.packages.find((p) => p.name === "libcrypto3");
    assert.deepEqual(libcrypto, {
      type: "apk",
      name: "libcrypto3",
      version: "3.3.2-r0",
      arch: "x86_64",
      origin: "openssl",
      license: "Apache-2.0",
      purl: "pkg:apk/wolfi/libcrypto3@3.3.2-r0?arch=x86_64",
    });
    // No `o:` line: the package is its own origin.
    assert.equal(inventory.packages.find((p) => p.name === "glibc")?.origin, "glibc");
    assert.deepEqual(names(inventory), WOLFI_PACKAGES.map((p) => `${p.name}@${p.version}`).sort());
  });

  it("counts the layers' decompressed tar bytes as the uncompressed size", async () => {
    const tars = [
      await tarOf([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]),
      await tarOf([{ name: "app/data", content: randomBytes(100_000) }]),
    ];
    const inventory = await read({
      layers: [
        { mediaType: LAYER_GZIP, bytes: await gzipOf(tars[0]!) },
        { mediaType: LAYER_TAR, bytes: tars[1]! },
      ],
    });
    assert.equal(inventory.sizeUncompressed, tars[0]!.length + tars[1]!.length);
  });

  it("takes the distro from os-release for the purls (alpine; Wolfi when there is none; /usr/lib/os-release behind a symlinked /etc one)", async () => {
    const db = { name: "lib/apk/db/installed", content: apkInstalled([{ name: "musl", version: "1.2.5-r0" }]) };
    const alpine = await read({
      layers: [await gzLayer([{ name: "etc/os-release", content: "ID=alpine\nVERSION_ID=3.20.3\n" }, db])],
    });
    assert.equal(alpine.distro, "alpine");
    assert.equal(alpine.packages[0]!.purl, "pkg:apk/alpine/musl@1.2.5-r0?arch=x86_64");

    const none = await read({ layers: [await gzLayer([db])] });
    assert.equal(none.distro, "");
    assert.equal(none.packages[0]!.purl, "pkg:apk/wolfi/musl@1.2.5-r0?arch=x86_64");

    const viaUsrLib = await read({
      layers: [
        await gzLayer([
          { name: "usr/lib/os-release", content: 'ID="chainguard"\nVERSION_ID=20230214\n' },
          { name: "etc/os-release", type: "symlink", linkname: "../usr/lib/os-release" },
          db,
        ]),
      ],
    });
    assert.equal(viaUsrLib.distro, "chainguard");
    assert.equal(viaUsrLib.packages[0]!.purl, "pkg:apk/chainguard/musl@1.2.5-r0?arch=x86_64");
  });

  it("honours a later layer: its database replaces the earlier one", async () => {
    const inventory = await read({
      layers: [
        await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]),
        await gzLayer([
          {
            name: "./lib/apk/db/installed",
            content: apkInstalled([{ name: "libcrypto3", version: "3.4.0-r1", origin: "openssl" }]),
          },
        ]),
      ],
    });
    assert.deepEqual(names(inventory), ["libcrypto3@3.4.0-r1"]);
  });

  it("honours whiteouts: a deleted database (or its directory) lists nothing", async () => {
    const db = await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]);
    const fileDeleted = await read({ layers: [db, await gzLayer([{ name: "lib/apk/db/.wh.installed" }])] });
    assert.deepEqual(fileDeleted.packages, []);
    assert.equal(fileDeleted.packageSource, "");

    const dirDeleted = await read({ layers: [db, await gzLayer([{ name: "/lib/.wh.apk" }])] });
    assert.deepEqual(dirDeleted.packages, []);

    // A whiteout deletes from the layers below, never its own layer's file.
    const recreated = await read({
      layers: [
        db,
        await gzLayer([
          { name: "lib/apk/db/installed", content: apkInstalled([{ name: "busybox", version: "1.37.0-r0" }]) },
          { name: "lib/apk/db/.wh.installed" },
        ]),
      ],
    });
    assert.deepEqual(names(recreated), ["busybox@1.37.0-r0"]);

    // Deleting something else leaves the database.
    const unrelated = await read({
      layers: [db, await gzLayer([{ name: "lib/apk/db/.wh.lock" }, { name: "etc/.wh.motd" }])],
    });
    assert.equal(unrelated.packages.length, WOLFI_PACKAGES.length);
  });

  it("honours opaque directories: the layers below contribute nothing under them", async () => {
    const db = await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]);
    const emptied = await read({ layers: [db, await gzLayer([{ name: "lib/apk/.wh..wh..opq" }])] });
    assert.deepEqual(emptied.packages, []);

    const replaced = await read({
      layers: [
        db,
        await gzLayer([
          { name: "lib/apk/db/.wh..wh..opq" },
          { name: "lib/apk/db/installed", content: apkInstalled([{ name: "busybox", version: "1.37.0-r0" }]) },
        ]),
      ],
    });
    assert.deepEqual(names(replaced), ["busybox@1.37.0-r0"]);

    const elsewhere = await read({ layers: [db, await gzLayer([{ name: "var/.wh..wh..opq" }])] });
    assert.equal(elsewhere.packages.length, WOLFI_PACKAGES.length);
  });

  it("reads zstd layers (and plain tar, and Docker's gzip media type in a schema 2 manifest)", async () => {
    const tar = await tarOf([
      { name: "etc/os-release", content: WOLFI_OS_RELEASE },
      { name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) },
      // Big enough for several zstd blocks around the database.
      { name: "usr/share/blob", content: randomBytes(400_000) },
    ]);
    const zstd = await read({ layers: [{ mediaType: LAYER_ZSTD, bytes: await zstdOf(tar) }] });
    assert.deepEqual(names(zstd), WOLFI_PACKAGES.map((p) => `${p.name}@${p.version}`).sort());
    assert.equal(zstd.sizeUncompressed, tar.length);

    const plain = await read({ layers: [{ mediaType: LAYER_TAR, bytes: tar }] });
    assert.deepEqual(names(plain), names(zstd));

    const docker = await read({
      manifestMediaType: "application/vnd.docker.distribution.manifest.v2+json",
      layers: [{ mediaType: DOCKER_LAYER_GZIP, bytes: await gzipOf(tar) }],
    });
    assert.deepEqual(names(docker), names(zstd));
  });
});

describe("inventory reader: an image umoci built", () => {
  // umoci's unpack/repack (its `insert` of this version writes a layer without the tar's final
  // padding and end blocks, which GNU tar and Go's archive/tar refuse, and so does the reader).
  it("reads the layers umoci writes, the whiteouts it makes for deleted files included", async () => {
    const exec = promisify(execFile);
    const umoci = (...args: string[]) => exec("umoci", args, { timeout: HANG_MS });
    const work = mkdtempSync(join(tmpdir(), "bulwark-reader-"));
    try {
      const image = `${join(work, "layout")}:v1`;
      const rootfs = join(work, "bundle", "rootfs");
      const file = (path: string, content: string) => {
        mkdirSync(join(rootfs, path, ".."), { recursive: true });
        writeFileSync(join(rootfs, path), content);
      };
      await umoci("init", "--layout", join(work, "layout"));
      await umoci("new", "--image", image);
      await umoci(
        "config",
        "--image",
        image,
        "--os",
        "linux",
        "--architecture",
        "arm64",
        "--config.label",
        "stage=base",
      );
      await umoci("unpack", "--rootless", "--image", image, join(work, "bundle"));
      file("etc/os-release", WOLFI_OS_RELEASE);
      file("lib/apk/db/installed", apkInstalled(WOLFI_PACKAGES));
      file("var/lib/dpkg/status", "Package: leftover\nStatus: install ok installed\nVersion: 1.0\n");
      await umoci("repack", "--refresh-bundle", "--image", image, join(work, "bundle"));
      // The next layer: the dpkg database deleted (a whiteout), the apk one rewritten.
      rmSync(join(rootfs, "var", "lib", "dpkg"), { recursive: true });
      file("lib/apk/db/installed", apkInstalled([{ name: "libcrypto3", version: "3.4.0-r1", origin: "openssl" }]));
      await umoci("repack", "--image", image, join(work, "bundle"));

      const source = await layoutSource(join(work, "layout"), "v1");
      assert.equal(JSON.parse(Buffer.from(source.manifest).toString()).layers.length, 2);
      const inventory = await readInventory(source);
      assert.equal(inventory.architecture, "arm64");
      assert.deepEqual(inventory.config.Labels, { stage: "base" });
      assert.equal(inventory.packageSource, "apk");
      assert.equal(inventory.distro, "wolfi");
      assert.deepEqual(names(inventory), ["libcrypto3@3.4.0-r1"]);
      assert.equal(inventory.packages[0]!.purl, "pkg:apk/wolfi/libcrypto3@3.4.0-r1?arch=x86_64");
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

describe("inventory reader: dpkg images", () => {
  const STATUS = [
    "Package: libssl3",
    "Status: install ok installed",
    "Priority: optional",
    "Architecture: amd64",
    "Multi-Arch: same",
    "Source: openssl",
    "Version: 3.0.14-1~deb12u2",
    "Description: Secure Sockets Layer toolkit - shared libraries",
    " This package is part of the OpenSSL project's implementation.",
    "",
    "Package: libc6",
    "Status: install ok installed",
    "Architecture: amd64",
    "Source: glibc (2.36-9+deb12u7)",
    "Version: 2.36-9+deb12u8",
    "",
    "Package: tzdata",
    "Status: deinstall ok config-files",
    "Architecture: all",
    "Version: 2024a-0+deb12u1",
    "",
    "Package: dpkg",
    "Status: install ok installed",
    "Architecture: amd64",
    "Version: 1:1.21.22",
    "",
  ].join("\n");

  it("reads var/lib/dpkg/status: installed stanzas only, Source as the origin, deb purls", async () => {
    const inventory = await read({
      layers: [
        await gzLayer([
          {
            name: "etc/os-release",
            content: 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
          },
          { name: "var/lib/dpkg/status", content: STATUS },
        ]),
      ],
    });
    assert.equal(inventory.packageSource, "dpkg");
    assert.equal(inventory.distro, "debian");
    assert.equal(inventory.distroVersion, "12");
    assert.deepEqual(names(inventory), ["dpkg@1:1.21.22", "libc6@2.36-9+deb12u8", "libssl3@3.0.14-1~deb12u2"]);
    const byName = new Map(inventory.packages.map((p) => [p.name, p]));
    assert.deepEqual(byName.get("libc6"), {
      type: "deb",
      name: "libc6",
      version: "2.36-9+deb12u8",
      arch: "amd64",
      origin: "glibc",
      license: "",
      purl: "pkg:deb/debian/libc6@2.36-9%2Bdeb12u8?arch=amd64",
    });
    assert.equal(byName.get("libssl3")!.origin, "openssl");
    assert.equal(byName.get("libssl3")!.purl, "pkg:deb/debian/libssl3@3.0.14-1~deb12u2?arch=amd64");
    assert.equal(byName.get("dpkg")!.origin, "dpkg");
    assert.equal(byName.get("dpkg")!.purl, "pkg:deb/debian/dpkg@1:1.21.22?arch=amd64");
  });

  it("reads distroless's status.d/ (one file per package, no Status field, .md5sums skipped) beside apk", async () => {
    const inventory = await read({
      layers: [
        await tarLayer([
          { name: "var/lib/dpkg/status.d/", type: "directory" },
          {
            name: "var/lib/dpkg/status.d/base-files",
            content: "Package: base-files\nVersion: 12.4+deb12u7\nArchitecture: amd64\n",
          },
          {
            name: "var/lib/dpkg/status.d/base-files.md5sums",
            content: "d41d8cd98f00b204e9800998ecf8427e  etc/debian_version\n",
          },
          { name: "var/lib/dpkg/status.d/netbase", content: "Package: netbase\nVersion: 6.4\nArchitecture: all\n" },
        ]),
        await tarLayer([
          { name: "lib/apk/db/installed", content: apkInstalled([{ name: "busybox", version: "1.37.0-r0" }]) },
        ]),
        await tarLayer([{ name: "var/lib/dpkg/status.d/.wh.netbase" }]),
      ],
    });
    assert.equal(inventory.packageSource, "apk+dpkg");
    assert.deepEqual(names(inventory), ["base-files@12.4+deb12u7", "busybox@1.37.0-r0"]);
    assert.equal(
      inventory.packages.find((p) => p.name === "base-files")!.purl,
      "pkg:deb/debian/base-files@12.4%2Bdeb12u7?arch=amd64",
    );
  });
});

describe("inventory reader: attached SBOMs", () => {
  const encode = (doc: unknown) => new TextEncoder().encode(JSON.stringify(doc));
  // A layer the source does not hold: reading any layer would fail, so a result proves none was.
  const unreadable = async (): Promise<Pick<TestImage, "layers" | "missing">> => {
    const layer = await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]);
    return { layers: [layer], missing: [digestOf(layer.bytes)] };
  };

  const SPDX = {
    spdxVersion: "SPDX-2.3",
    SPDXID: "SPDXRef-DOCUMENT",
    name: "sbom-sha256:abc",
    documentDescribes: ["SPDXRef-Package-image"],
    packages: [
      {
        SPDXID: "SPDXRef-Package-image",
        name: "sha256:abc",
        externalRefs: [
          { referenceCategory: "PACKAGE-MANAGER", referenceType: "purl", referenceLocator: "pkg:oci/app@sha256%3Aabc" },
        ],
      },
      {
        SPDXID: "SPDXRef-OperatingSystem",
        name: "wolfi",
        versionInfo: "20230201",
        primaryPackagePurpose: "OPERATING-SYSTEM",
      },
      {
        SPDXID: "SPDXRef-Package-libcrypto3",
        name: "libcrypto3",
        versionInfo: "3.3.2-r0",
        licenseConcluded: "NOASSERTION",
        licenseDeclared: "Apache-2.0",
        externalRefs: [
          {
            referenceCategory: "PACKAGE-MANAGER",
            referenceType: "purl",
            referenceLocator: "pkg:apk/wolfi/libcrypto3@3.3.2-r0?arch=x86_64&upstream=openssl&distro=wolfi",
          },
        ],
      },
      { SPDXID: "SPDXRef-File-x", name: "no purl, not a package we can type" },
    ],
  };
  const CYCLONEDX = {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    version: 1,
    metadata: { component: { type: "container", name: "app" } },
    components: [
      { type: "operating-system", name: "debian", version: "12" },
      {
        type: "library",
        name: "libssl3",
        version: "3.0.14-1~deb12u2",
        purl: "pkg:deb/debian/libssl3@3.0.14-1~deb12u2?arch=amd64&upstream=openssl",
        licenses: [{ license: { id: "Apache-2.0" } }],
      },
      {
        type: "library",
        name: "express",
        version: "4.19.2",
        purl: "pkg:npm/express@4.19.2",
        licenses: [{ expression: "MIT" }],
        components: [{ type: "library", name: "qs", version: "6.11.0", purl: "pkg:npm/qs@6.11.0" }],
      },
    ],
  };

  it("uses an attached SPDX document instead of the layers", async () => {
    const inventory = await read({
      ...(await unreadable()),
      sboms: [{ artifactType: "application/spdx+json", content: encode(SPDX) }],
    });
    assert.equal(inventory.packageSource, "sbom:spdx");
    assert.equal(inventory.sizeUncompressed, 0);
    assert.equal(inventory.distro, "wolfi");
    assert.deepEqual(inventory.packages, [
      {
        type: "apk",
        name: "libcrypto3",
        version: "3.3.2-r0",
        arch: "x86_64",
        origin: "openssl",
        license: "Apache-2.0",
        purl: "pkg:apk/wolfi/libcrypto3@3.3.2-r0?arch=x86_64&upstream=openssl&distro=wolfi",
      },
    ]);
  });

  it("uses an attached CycloneDX document (media type with a version parameter), nested components included", async () => {
    const inventory = await read({
      ...(await unreadable()),
      sboms: [
        { artifactType: "application/vnd.cyclonedx+json;version=1.5", content: encode(CYCLONEDX) },
        { artifactType: "application/spdx+json", content: encode(SPDX) },
      ],
    });
    assert.equal(inventory.packageSource, "sbom:cyclonedx");
    assert.equal(inventory.distro, "debian");
    assert.deepEqual(names(inventory), ["express@4.19.2", "libssl3@3.0.14-1~deb12u2", "qs@6.11.0"]);
    const libssl = inventory.packages.find((p) => p.name === "libssl3")!;
    assert.deepEqual(
      [libssl.type, libssl.arch, libssl.origin, libssl.license],
      ["deb", "amd64", "openssl", "Apache-2.0"],
    );
    assert.equal(inventory.packages.find((p) => p.name === "express")!.type, "npm");
  });

  it("falls back to the layers when no attached document parses", async () => {
    const inventory = await read({
      layers: [await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }])],
      sboms: [
        { artifactType: "application/spdx+json", content: new TextEncoder().encode("{not json") },
        { artifactType: "application/vnd.cyclonedx+json", content: encode({ bomFormat: "SPDX?" }) },
        { artifactType: "application/vnd.dev.cosign.simplesigning.v1+json", content: encode(SPDX) },
      ],
    });
    assert.equal(inventory.packageSource, "apk");
    assert.equal(inventory.packages.length, WOLFI_PACKAGES.length);
  });
});

describe("inventory reader: hostile and malformed images end in an InventoryError", () => {
  const db = { name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) };

  it("a tar bomb passes the decompressed-bytes limit", async () => {
    // 8 MiB of zeros gzip to a few KiB.
    const bomb = await gzLayer([{ name: "zeros", content: Buffer.alloc(8 << 20) }]);
    assert.ok(bomb.bytes.length < 64 * 1024);
    await rejectsWith({ layers: [bomb] }, /decompress to more than 1048576 bytes/, { maxDecompressedBytes: 1 << 20 });
    // The limit is over all layers together.
    const half = await gzLayer([{ name: "zeros", content: Buffer.alloc(600 << 10) }]);
    await rejectsWith({ layers: [half, half] }, /decompress to more than/, { maxDecompressedBytes: 1 << 20 });
  });

  it("a `../` path is refused (also a hard link's target)", async () => {
    await rejectsWith(
      { layers: [await gzLayer([db, { name: "../../etc/passwd", content: "root::0:0" }])] },
      /"\.\.\/\.\.\/etc\/passwd" leaves the image root/,
    );
    await rejectsWith(
      { layers: [await gzLayer([{ name: "lib/apk/db/../../../x", content: "" }])] },
      /leaves the image root/,
    );
    await rejectsWith(
      { layers: [await gzLayer([{ name: "etc/shadow", type: "link", linkname: "../../../etc/shadow" }])] },
      /leaves the image root/,
    );
  });

  it("symlinks are never followed: a symlinked database, a loop, a symlink over the database", async () => {
    const symlinked = await read({
      layers: [
        await gzLayer([
          { name: "tmp/installed", content: db.content },
          { name: "lib/apk/db/installed", type: "symlink", linkname: "/tmp/installed" },
          { name: "var/lib/dpkg", type: "symlink", linkname: "../../var/lib/dpkg" },
          { name: "etc/os-release", type: "symlink", linkname: "os-release" },
          { name: "a", type: "symlink", linkname: "b" },
          { name: "b", type: "symlink", linkname: "a" },
        ]),
      ],
    });
    assert.deepEqual(symlinked.packages, []);
    assert.equal(symlinked.distro, "");

    const replaced = await read({
      layers: [await gzLayer([db]), await gzLayer([{ name: "lib/apk", type: "symlink", linkname: "/tmp/elsewhere" }])],
    });
    assert.deepEqual(replaced.packages, []);

    // A hard link is the same file: kept.
    const hardLinked = await read({
      layers: [
        await gzLayer([
          { name: "usr/lib/os-release", content: "ID=wolfi\n" },
          { name: "etc/os-release", type: "link", linkname: "usr/lib/os-release" },
          db,
        ]),
      ],
    });
    assert.equal(hardLinked.distro, "wolfi");
  });

  it("a corrupt tar header, a header claiming more data than the layer has, and a truncated tar", async () => {
    const garbage = randomBytes(4096);
    await rejectsWith(
      { layers: [{ mediaType: LAYER_TAR, bytes: garbage }] },
      /layer 1 \(sha256:[0-9a-f]{64}\): not a readable tar archive/,
    );

    // A header saying the entry is 64 GiB (octal 1000000000000 in the 12-byte size field), checksum fixed.
    const tar = Buffer.from(await tarOf([{ name: "huge", content: "x" }]));
    tar.write("1000000000000".slice(0, 11) + "\0", 124, "latin1");
    tar.fill(" ", 148, 156);
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += tar[i]!;
    tar.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
    await rejectsWith({ layers: [{ mediaType: LAYER_GZIP, bytes: await gzipOf(tar) }] }, /not a readable tar archive/);

    const truncated = (await tarOf([db, { name: "big", content: randomBytes(50_000) }])).subarray(0, 20_000);
    await rejectsWith({ layers: [{ mediaType: LAYER_TAR, bytes: truncated }] }, /not a readable tar archive/);
  });

  it("truncated or corrupt gzip and zstd data", async () => {
    const tar = await tarOf([db, { name: "big", content: randomBytes(200_000) }]);
    const gz = await gzipOf(tar);
    await rejectsWith(
      { layers: [{ mediaType: LAYER_GZIP, bytes: gz.subarray(0, gz.length / 2) }] },
      /the gzip data is corrupt or truncated/,
    );
    await rejectsWith({ layers: [{ mediaType: LAYER_GZIP, bytes: tar }] }, /the gzip data is corrupt or truncated/);
    const zst = await zstdOf(tar);
    await rejectsWith(
      { layers: [{ mediaType: LAYER_ZSTD, bytes: zst.subarray(0, zst.length / 2) }] },
      /the zstd data is corrupt or truncated/,
    );
    await rejectsWith({ layers: [{ mediaType: LAYER_ZSTD, bytes: gz }] }, /the zstd data is corrupt or truncated/);
  });

  it("a zstd frame whose window passes the limit", async () => {
    // From stdin zstd does not know the size, so the frame declares its level's window (2 MiB at -3).
    const zst = await zstdOf(await tarOf([db]), ["-3"]);
    await rejectsWith(
      { layers: [{ mediaType: LAYER_ZSTD, bytes: zst }] },
      /zstd window is \d+ bytes, more than the 65536 allowed/,
      {
        maxZstdWindowBytes: 65536,
      },
    );
  });

  it("a missing blob (layer or config)", async () => {
    const layer = await gzLayer([db]);
    await rejectsWith(
      { layers: [layer], missing: [digestOf(layer.bytes)] },
      /the layer 1's blob sha256:[0-9a-f]{64} is missing from the store/,
    );
    const source = imageSource({ layers: [layer] });
    const withoutConfig = {
      ...source,
      openBlob: async (d: string) => (d === source.configDigest ? undefined : source.openBlob(d)),
    };
    await assert.rejects(
      readInventory(withoutConfig),
      (e: unknown) => e instanceof InventoryError && /config's blob .* is missing/.test(e.message),
    );
  });

  it("limits on entries, layers, the package database's size and the config's size", async () => {
    const many = await tarLayer(Array.from({ length: 50 }, (_, i) => ({ name: `f${i}`, content: "" })));
    await rejectsWith({ layers: [many] }, /more than 40 entries/, { maxEntries: 40 });
    const small = await tarLayer([db]);
    await rejectsWith({ layers: [small, small, small] }, /3 layers, more than the 2 allowed/, { maxLayers: 2 });
    await rejectsWith({ layers: [small] }, /lib\/apk\/db\/installed is \d+ bytes, more than the 100 allowed/, {
      maxPackageDbBytes: 100,
    });
    await rejectsWith({ layers: [small] }, /the config is \d+ bytes, more than the 100 allowed/, {
      maxConfigBytes: 100,
    });
  });

  it("anything but an image manifest with an image config and known layer types", async () => {
    const index = {
      manifest: new TextEncoder().encode(
        JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: [] }),
      ),
      openBlob: async () => undefined,
      async *sboms() {},
    };
    await assert.rejects(readInventory(index), /an image index has no layers of its own/);
    await assert.rejects(
      readInventory({ ...index, manifest: new TextEncoder().encode("[1,2") }),
      /the manifest is not valid UTF-8 JSON/,
    );
    await assert.rejects(
      readInventory({ ...index, manifest: new TextEncoder().encode(JSON.stringify({ schemaVersion: 1, name: "x" })) }),
      /not an OCI or Docker schema 2 image manifest/,
    );
    await rejectsWith(
      { layers: [{ mediaType: "application/vnd.example.layer+weird", bytes: new Uint8Array(10) }] },
      /unsupported layer media type "application\/vnd.example.layer\+weird"/,
    );
    await rejectsWith(
      { layers: [await gzLayer([db])], config: [1, 2] as unknown as Record<string, unknown> },
      /the config is not a JSON object/,
    );
  });

  it("an error of the store itself is passed on as it is, not recorded as the image's", async () => {
    const source = imageSource({ layers: [await gzLayer([db])] });
    const failing = {
      ...source,
      openBlob: async (digest: string) => {
        if (digest === source.configDigest) return source.openBlob(digest);
        return new Readable({
          read() {
            this.destroy(new Error("store unavailable"));
          },
        });
      },
    };
    await assert.rejects(
      readInventory(failing),
      (e: unknown) => !(e instanceof InventoryError) && (e as Error).message === "store unavailable",
    );
  });
});

const MiB = 1024 * 1024;

describe("inventory reader: bounded work on hostile layers", () => {
  const rejects = (layer: Uint8Array, message: RegExp, limits?: Parameters<typeof readInventory>[1]) =>
    rejectsWith({ layers: [{ mediaType: LAYER_ZSTD, bytes: layer }] }, message, limits);

  it("zstd: a window above 8 MiB is refused by default, from the frame header, before any decoding", async () => {
    // 128 MiB windows and 600 one-byte RLE blocks: 2,406 bytes that held the event loop for seconds.
    await rejects(rleZstd(17, 600), /its zstd window is 134217728 bytes, more than the 8388608 allowed/);
    // A single-segment frame's window is its declared content size (here 2^40): refused before
    // the decoder would allocate it.
    const huge = Uint8Array.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0, 0x01, 0, 0]);
    await rejects(huge, /its zstd window is 1099511627776 bytes/);
  });

  it("zstd: blocks or frames that decode to almost nothing for their window are refused", async () => {
    // Empty RLE blocks in an 8 MiB window: each moves the whole window, decoding nothing.
    await rejects(rleZstd(13, 5000, 0), /its zstd data makes the decoder move \d+ bytes for 0 decoded/);
    // Frame after frame, each an empty block in an 8 MiB window (each allocates the window).
    const frames = Buffer.concat(Array.from({ length: 200 }, () => rleZstd(13, 1, 0)));
    await rejects(frames, /its zstd data makes the decoder move/);
  });

  it("zstd: real layers within the limits read whole (an 8 MiB window, long runs of zeros)", async () => {
    const tar = await tarOf([
      { name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) },
      { name: "zeros", content: new Uint8Array(24 * MiB) },
      { name: "random", content: randomBytes(MiB) },
    ]);
    for (const args of [["-3"], ["-1", "--zstd=wlog=23"], ["-1", "--zstd=wlog=10"]]) {
      const inventory = await read({ layers: [{ mediaType: LAYER_ZSTD, bytes: await zstdOf(tar, args) }] });
      assert.equal(inventory.packages.length, WOLFI_PACKAGES.length, args.join(" "));
      assert.equal(inventory.sizeUncompressed, tar.length);
    }
  });

  it("whiteouts: thousands of status.d files deleted, replaced or hidden cost a lookup each", async () => {
    const files = 15_000;
    const stanza = (i: number) => `Package: p${i}\nVersion: 1.${i}\nArchitecture: amd64\n`;
    const base = await tarLayer(
      Array.from({ length: files }, (_, i) => ({ name: `var/lib/dpkg/status.d/p${i}`, content: stanza(i) })),
    );
    // The next layer whites out the even ones, and puts a symlink over every third one.
    const deletions = await tarLayer([
      ...Array.from({ length: files / 2 }, (_, i) => ({ name: `var/lib/dpkg/status.d/.wh.p${2 * i}` })),
      ...Array.from({ length: files / 3 }, (_, i) => ({
        name: `var/lib/dpkg/status.d/p${3 * i}`,
        type: "symlink" as const,
        linkname: "/dev/null",
      })),
      // Put back, then a non-directory over its directory in the same layer: gone too.
      { name: "var/lib/dpkg/status.d/p0", content: stanza(0) },
    ]);
    const kept = new Set(
      Array.from({ length: files }, (_, i) => i)
        .filter((i) => i % 2 !== 0 && i % 3 !== 0)
        .map((i) => `p${i}@1.${i}`),
    );
    const inventory = await read({ layers: [base, deletions] });
    assert.deepEqual(new Set(names(inventory)), new Set([...kept, "p0@1.0"]));
    // An opaque status.d/ in a third layer hides them all.
    const opaque = await tarLayer([{ name: "var/lib/dpkg/status.d/.wh..wh..opq" }]);
    assert.equal((await read({ layers: [base, deletions, opaque] })).packages.length, 0);
  });

  it("a root filesystem of more package database files than the limit (20,000 by default) is refused", async () => {
    const layer = await tarLayer(
      Array.from({ length: 20_001 }, (_, i) => ({ name: `var/lib/dpkg/status.d/p${i}`, content: "" })),
    );
    await rejectsWith({ layers: [layer] }, /the package databases are more than 20000 files \(the limit/);
    // Files replaced in a later layer are not counted twice.
    const some = await tarLayer(
      Array.from({ length: 60 }, (_, i) => ({ name: `var/lib/dpkg/status.d/p${i}`, content: "" })),
    );
    await read({ layers: [some, some] }, { maxKeptFiles: 60 });
    await rejectsWith({ layers: [some] }, /more than 59 files/, { maxKeptFiles: 59 });
  });

  it("packages: more than 50,000 in the databases, or a database over 16 MiB, is refused", async () => {
    const tiny = "P:a\nV:1\n\n".repeat(50_001);
    await rejectsWith(
      { layers: [await tarLayer([{ name: "lib/apk/db/installed", content: tiny }])] },
      /the package databases list more than 50000 packages \(the limit\)/,
    );
    // The cap counts every database together.
    const dpkg = await tarLayer([
      { name: "var/lib/dpkg/status", content: "Package: a\nVersion: 1\n\nPackage: b\nVersion: 1\n" },
      { name: "var/lib/dpkg/status.d/c", content: "Package: c\nVersion: 1\n" },
    ]);
    await rejectsWith({ layers: [dpkg] }, /more than 2 packages/, { maxPackages: 2 });
    const big = await tarLayer([{ name: "var/lib/dpkg/status", content: new Uint8Array(16 * MiB + 1) }]);
    await rejectsWith({ layers: [big] }, /is 16777217 bytes, more than the 16777216 allowed for a package database/);
  });
});

describe("inventory reader: attached SBOMs are loaded one at a time", () => {
  const spdx = (name: string) =>
    new TextEncoder().encode(
      JSON.stringify({
        spdxVersion: "SPDX-2.3",
        SPDXID: "SPDXRef-DOCUMENT",
        name: "sbom",
        packages: [
          {
            SPDXID: `SPDXRef-Package-${name}`,
            name,
            versionInfo: "1.0-r0",
            externalRefs: [
              {
                referenceCategory: "PACKAGE-MANAGER",
                referenceType: "purl",
                referenceLocator: `pkg:apk/wolfi/${name}@1.0-r0?arch=x86_64`,
              },
            ],
          },
        ],
      }),
    );
  const junk = { artifactType: "application/spdx+json", content: new TextEncoder().encode("not json") };

  /** The image's source with `sboms` served lazily, counting what the reader pulled. */
  async function counting(sboms: AttachedSbom[]) {
    const layer = await gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]);
    const source = imageSource({ layers: [layer] });
    const pulled: number[] = [];
    const budgets: unknown[] = [];
    const lazy: ImageSource = {
      ...source,
      async *sboms(budget) {
        budgets.push(budget);
        for (const [i, sbom] of sboms.entries()) {
          pulled.push(i);
          yield sbom;
        }
      },
    };
    return { source: lazy, pulled, budgets };
  }

  it("stops at the first that parses: the older ones are never loaded", async () => {
    const { source, pulled, budgets } = await counting([
      junk,
      { artifactType: "application/spdx+json", content: spdx("newest") },
      { artifactType: "application/spdx+json", content: spdx("older") },
    ]);
    const inventory = await readInventory(source);
    assert.deepEqual(names(inventory), ["newest@1.0-r0"]);
    assert.deepEqual(pulled, [0, 1]);
    assert.deepEqual(budgets, [{ maxCount: 5, maxEachBytes: 32 * MiB, maxTotalBytes: 64 * MiB }]);
  });

  it("tries at most 5, and no more bytes than the budget, then reads the layers", async () => {
    const { source, pulled } = await counting([...Array.from({ length: 8 }, () => junk)]);
    const inventory = await readInventory(source);
    assert.equal(inventory.packageSource, "apk");
    assert.deepEqual(pulled, [0, 1, 2, 3, 4, 5]);
    // A source that ignores the budget's bytes: the reader stops at the one that passes them.
    const big = { artifactType: "application/spdx+json", content: spdx("x".repeat(200)) };
    const overBudget = await counting([junk, big, big]);
    const fromLayers = await readInventory(overBudget.source, { maxSbomTotalBytes: junk.content.length + 100 });
    assert.equal(fromLayers.packageSource, "apk");
    assert.deepEqual(overBudget.pulled, [0, 1]);
  });
});

describe("inventory reader: in a thread of its own", () => {
  const isolated = (source: ImageSource, options: Partial<Parameters<typeof readInventoryIsolated>[1]> = {}) =>
    readInventoryIsolated(source, { deadlineMs: HANG_MS, maxHeapMiB: 256, ...options });
  const layer = () => gzLayer([{ name: "lib/apk/db/installed", content: apkInstalled(WOLFI_PACKAGES) }]);

  it("reads what readInventory reads, blobs and SBOMs streamed from this thread", async () => {
    const image = { layers: [await layer(), await gzLayer([{ name: "app/data", content: randomBytes(300_000) }])] };
    assert.deepEqual(await isolated(imageSource(image)), await read(image));
    const spdx = imageSource({ layers: [await layer()], sboms: [] });
    const fromSbom = await isolated({
      ...spdx,
      async *sboms() {
        yield { artifactType: "application/spdx+json", content: new TextEncoder().encode("{") };
      },
    });
    assert.equal(fromSbom.packageSource, "apk");
  });

  it("an InventoryError stays one; a store's error comes back as the very error thrown", async () => {
    await assert.rejects(
      isolated(imageSource({ layers: [{ mediaType: LAYER_ZSTD, bytes: rleZstd(17, 10) }] })),
      (e: unknown) => e instanceof InventoryError && /zstd window is 134217728 bytes/.test(e.message),
    );
    const source = imageSource({ layers: [await layer()] });
    const storeError = new Error("store unavailable");
    await assert.rejects(
      isolated({
        ...source,
        openBlob: async (digest) => {
          if (digest === source.configDigest) return source.openBlob(digest);
          throw storeError;
        },
      }),
      (e: unknown) => e === storeError,
    );
  });

  it("a thread that ended its read cleanly reads the next image; one stopped at its deadline is not reused", async () => {
    const image = { layers: [await layer()] };
    await isolated(imageSource(image)); // a thread of this heap size is now idle, if none was
    const before = readerThreadsStarted();
    assert.deepEqual(await isolated(imageSource(image)), await read(image));
    await assert.rejects(
      isolated(imageSource({ layers: [{ mediaType: LAYER_ZSTD, bytes: rleZstd(17, 10) }] })),
      InventoryError,
    );
    assert.equal((await isolated(imageSource(image))).packageSource, "apk");
    assert.equal(readerThreadsStarted(), before, "three reads, an InventoryError among them, on the idle thread");
    const limits = { maxZstdWindowBytes: 128 * MiB, maxZstdWorkPerByte: Number.MAX_SAFE_INTEGER };
    await assert.rejects(
      isolated(imageSource({ layers: [{ mediaType: LAYER_ZSTD, bytes: rleZstd(17, 50_000) }] }), {
        limits,
        deadlineMs: 500,
      }),
      /took longer than 500 ms/,
    );
    assert.equal(readerThreadsStarted(), before, "the stopped read had the idle thread");
    assert.deepEqual(await isolated(imageSource(image)), await read(image));
    assert.equal(readerThreadsStarted(), before + 1, "the stopped thread was not reused: a new one read");
  });

  it("a read past its deadline is stopped and recorded as the image's error", async () => {
    // Limits lifted so the hostile layer runs (128 MiB windows moved per 1-byte block): minutes of work.
    const limits = { maxZstdWindowBytes: 128 * MiB, maxZstdWorkPerByte: Number.MAX_SAFE_INTEGER };
    await assert.rejects(
      isolated(imageSource({ layers: [{ mediaType: LAYER_ZSTD, bytes: rleZstd(17, 50_000) }] }), {
        limits,
        deadlineMs: 1000,
      }),
      (e: unknown) => e instanceof InventoryError && /took longer than 1000 ms \(the limit\)/.test(e.message),
    );
  });

  it("a read that runs out of its heap is stopped and recorded as the image's error", async () => {
    // Two million tiny packages, none of the limits in the way but the heap's.
    const tiny = "P:a\nV:1\n\n".repeat(2_000_000);
    const image = { layers: [await tarLayer([{ name: "lib/apk/db/installed", content: tiny }])] };
    await assert.rejects(
      isolated(imageSource(image), {
        limits: { maxPackages: Infinity, maxPackageDbBytes: 64 * MiB },
        maxHeapMiB: 64,
      }),
      (e: unknown) => e instanceof InventoryError && /ran out of memory \(the 64 MiB a read may use\)/.test(e.message),
    );
  });

  it("an aborted read stops at once", async () => {
    const limits = { maxZstdWindowBytes: 128 * MiB, maxZstdWorkPerByte: Number.MAX_SAFE_INTEGER };
    const abort = new AbortController();
    const reading = isolated(
      { ...imageSource({ layers: [{ mediaType: LAYER_ZSTD, bytes: rleZstd(17, 50_000) }] }), signal: abort.signal },
      { limits },
    );
    abort.abort();
    await assert.rejects(reading, /the read was stopped/);
  });
});
