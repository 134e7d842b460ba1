// Images for the image read RPCs' suites: an image per platform pushed over the registry protocol
// (a config with runtime settings and one synthetic layer), and inventories recorded for them
// through the inventory repository's own queue steps (the layers are no real file system, so
// the indexer would not read them). The indexer's suites build real images (test/support/images.ts).
import assert from "node:assert/strict";
import type { InstalledPackage, Inventory } from "../../src/images/inventory/types.js";
import { InventoriesRepository } from "../../src/images/storage/inventories.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import { descriptorOf, digestOf, MEDIA_TYPES, type OciClient } from "./oci.js";
import type { TestServer } from "./server.js";

export interface Pushed {
  digest: string;
  size: number;
}

/** Pushes an image for one platform (a config with runtime settings and one layer); its digest and stored size. */
export async function pushPlatformImage(
  oci: OciClient,
  name: string,
  platform: { architecture: string; variant?: string },
): Promise<Pushed> {
  const config = JSON.stringify({
    ...platform,
    os: "linux",
    config: {
      User: "65532",
      Env: ["PATH=/usr/bin", `PLATFORM=${platform.architecture}`],
      Entrypoint: ["/usr/bin/app"],
      Cmd: ["--serve"],
      ExposedPorts: { "8080/tcp": {} },
      WorkingDir: "/work",
      Labels: { "org.opencontainers.image.title": `app ${platform.architecture}` },
      StopSignal: "SIGTERM",
    },
  });
  const layer = `layer for ${platform.architecture}${platform.variant ?? ""} `.repeat(40);
  for (const blob of [config, layer]) assert.equal((await oci.postBlob(name, blob)).status, 201);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.ociManifest,
    config: descriptorOf(MEDIA_TYPES.ociConfig, config),
    layers: [descriptorOf(MEDIA_TYPES.ociLayer, layer)],
  });
  const digest = digestOf(manifest);
  const put = await oci.putManifest(name, digest, manifest, MEDIA_TYPES.ociManifest);
  assert.equal(put.status, 201, put.body.toString());
  return { digest, size: Buffer.byteLength(config) + Buffer.byteLength(layer) };
}

export const pkg = (name: string, version: string, origin = name): InstalledPackage => ({
  type: "apk",
  name,
  version,
  arch: "x86_64",
  origin,
  license: "Apache-2.0",
  purl: `pkg:apk/wolfi/${name}@${version}?arch=x86_64`,
});

export const inventory = (packages: InstalledPackage[]): Inventory => ({
  os: "linux",
  architecture: "amd64",
  variant: "",
  created: new Date("2026-01-02T03:04:05Z"),
  config: { Labels: { tier: "test" } },
  sizeCompressed: 1234,
  sizeUncompressed: 5678,
  packageSource: "apk",
  distro: "wolfi",
  distroVersion: "20230201",
  packages,
});

/** Records `inv` as the read inventory of `digest`, through the repository's own queue steps. */
export async function saveInventory(server: TestServer, digest: string, inv: Inventory): Promise<void> {
  const inventories = new InventoriesRepository(imagesDb(server.db));
  const now = new Date();
  await inventories.enqueue(digest, now);
  for (;;) {
    const claimed = await inventories.claim(now, 60_000);
    assert.ok(claimed, `nothing to claim before ${digest}`);
    if (claimed.digest === digest) {
      assert.equal(await inventories.save(claimed, inv, now), true);
      return;
    }
  }
}
