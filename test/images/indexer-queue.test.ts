// The inventory queue's rules on a real database, with the times given (no clock): a claim
// leases the oldest pending image and counts an attempt; a lease that ran out (a killed reader)
// is claimed again; after three unfinished reads the image is failed; a failure that may pass is
// retried, a malformed image fails at once; a requeue (an SBOM attached) mid-read makes that
// read's result count for nothing; a save replaces the image's indexed packages.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { InventoriesRepository, MAX_INVENTORY_ATTEMPTS } from "../../src/images/storage/inventories.js";
import type { Inventory } from "../../src/images/inventory/types.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";

let counter = 0;
const digest = () => `sha256:${createHash("sha256").update(`queue ${process.pid} ${++counter}`).digest("hex")}`;
const at = (seconds: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, seconds));
const LEASE_MS = 10_000;

const inventory = (packages: [name: string, version: string, origin: string][]): Inventory => ({
  os: "linux",
  architecture: "amd64",
  variant: "",
  config: {},
  sizeCompressed: 10,
  sizeUncompressed: 20,
  packageSource: "apk",
  distro: "wolfi",
  distroVersion: "",
  packages: packages.map(([name, version, origin]) => ({
    type: "apk",
    name,
    version,
    arch: "x86_64",
    origin,
    license: "",
    purl: `pkg:apk/wolfi/${name}@${version}?arch=x86_64`,
  })),
});

for (const backend of backends()) {
  describe(`inventory queue [${backend}]`, () => {
    let server: TestServer;
    let queue: InventoriesRepository;
    before(async () => {
      // This server reads nothing itself: the test claims.
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      queue = new InventoriesRepository(imagesDb(server.db));
    });
    after(() => server.close());

    /** Claims until `target` comes up (other tests' rows are claimed and saved on the way). */
    async function claimOnly(target: string, now: Date): Promise<string | undefined> {
      for (;;) {
        const got = await queue.claim(now, LEASE_MS);
        if (got === undefined || got === target) return got;
        assert.ok(await queue.save(got, inventory([]), now));
      }
    }

    it("counts a killed read as an attempt, and fails the image after three", async () => {
      const image = digest();
      assert.equal(await queue.enqueue(image, at(0)), "pending");
      assert.equal(await claimOnly(image, at(1)), image);
      assert.equal(await queue.claim(at(2), LEASE_MS), undefined, "leased: not claimed again");
      // Each lease runs out unfinished (the reader was killed).
      assert.equal(await claimOnly(image, at(20)), image);
      assert.equal(await claimOnly(image, at(40)), image);
      assert.equal((await queue.get([image]))[0]!.attempts, MAX_INVENTORY_ATTEMPTS);
      assert.equal(await claimOnly(image, at(60)), undefined);
      const [row] = await queue.get([image]);
      assert.equal(row!.state, "failed");
      assert.match(row!.error!, /stopped unfinished 3 times/);
    });

    it("retries a failure that may pass, fails a malformed image at once", async () => {
      const flaky = digest();
      await queue.enqueue(flaky, at(0));
      assert.equal(await claimOnly(flaky, at(1)), flaky);
      assert.equal(await queue.fail(flaky, "blob store unreachable", at(2), { retry: true }), "pending");
      assert.equal(await claimOnly(flaky, at(3)), flaky, "claimed again at once");
      assert.equal(await queue.fail(flaky, "blob store unreachable", at(4), { retry: true }), "pending");
      assert.equal(await claimOnly(flaky, at(5)), flaky);
      assert.equal(await queue.fail(flaky, "blob store unreachable again", at(6), { retry: true }), "failed");
      assert.equal((await queue.get([flaky]))[0]!.error, "blob store unreachable again", "the last error");

      const hostile = digest();
      await queue.enqueue(hostile, at(0));
      assert.equal(await claimOnly(hostile, at(1)), hostile);
      assert.equal(await queue.fail(hostile, "a tar bomb", at(2)), "failed");
      const [row] = await queue.get([hostile]);
      assert.deepEqual([row!.state, row!.attempts, row!.error], ["failed", 1, "a tar bomb"]);
    });

    it("drops a read's result when the image was requeued meanwhile, then reads it again", async () => {
      const image = digest();
      await queue.enqueue(image, at(0));
      assert.equal(await claimOnly(image, at(1)), image);
      assert.equal(await queue.requeue(image, at(2)), true);
      assert.equal(await queue.save(image, inventory([["zlib", "1.3-r0", "zlib"]]), at(3)), false, "not saved");
      assert.equal((await queue.get([image]))[0]!.state, "pending");
      assert.equal(await claimOnly(image, at(4)), image);
      assert.equal(await queue.save(image, inventory([["zlib", "1.3-r1", "zlib"]]), at(5)), true);
      const [row] = await queue.get([image]);
      assert.deepEqual([row!.state, row!.attempts, row!.packages[0]!.version], ["done", 1, "1.3-r1"]);
      assert.equal(await queue.requeue(digest(), at(6)), false, "an unknown image is not queued by a requeue");
      assert.equal(await queue.enqueue(image, at(7)), "done", "a push of a read image sees it done");
    });

    it("replaces the indexed packages on every save, found by name, origin and purl", async () => {
      const image = digest();
      await queue.enqueue(image, at(0));
      assert.equal(await claimOnly(image, at(1)), image);
      await queue.save(image, inventory([["libcrypto3", "3.3.0-r2", "openssl"]]), at(2));
      assert.ok((await queue.digestsWithPackages(["openssl"], [])).includes(image), "by origin");
      assert.ok((await queue.digestsWithPackages(["libcrypto3"], [])).includes(image), "by name");
      assert.ok((await queue.digestsWithPackages([], ["pkg:apk/wolfi/openssl"])).includes(image), "by purl");
      assert.ok(!(await queue.digestsWithPackages([], ["pkg:deb/debian/openssl"])).includes(image), "not another type");
      await queue.requeue(image, at(3));
      assert.equal(await claimOnly(image, at(4)), image);
      await queue.save(image, inventory([["busybox", "1.36.1-r6", "busybox"]]), at(5));
      assert.ok(!(await queue.digestsWithPackages(["openssl"], [])).includes(image), "the old packages are gone");
      assert.ok((await queue.digestsWithPackages(["busybox"], [])).includes(image));
    });
  });
}
