// The inventory queue's rules on a real database, with the times given (no clock): a claim
// leases the oldest pending image and counts an attempt; a lease that ran out (a killed reader)
// is claimed again; after three unfinished reads the image is failed; a failure that may pass is
// retried, a malformed image fails at once; a requeue (an SBOM attached) mid-read makes that
// read's result count for nothing, as does another claim (each claim's lease has its own token);
// a transiently failed image is queued again by a push, a malformed one is not; a save replaces
// the image's indexed packages.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  InventoriesRepository,
  MAX_INVENTORY_ATTEMPTS,
  type InventoryLease,
} from "../../src/images/storage/inventories.js";
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
    async function claimOnly(target: string, now: Date): Promise<InventoryLease | undefined> {
      for (;;) {
        const got = await queue.claim(now, LEASE_MS);
        if (got === undefined || got.digest === target) return got;
        assert.ok(await queue.save(got, inventory([]), now));
      }
    }
    const claimed = async (target: string, now: Date) => (await claimOnly(target, now))?.digest;
    const attemptsOf = async (image: string) => (await queue.get([image]))[0]!.attempts;

    it("counts a killed read as an attempt, and fails the image after three", async () => {
      const image = digest();
      assert.equal(await queue.enqueue(image, at(0)), "pending");
      assert.equal(await claimed(image, at(1)), image);
      assert.equal(await queue.claim(at(2), LEASE_MS), undefined, "leased: not claimed again");
      // Each lease runs out unfinished (the reader was killed).
      assert.equal(await claimed(image, at(20)), image);
      assert.equal(await claimed(image, at(40)), image);
      assert.equal(await attemptsOf(image), MAX_INVENTORY_ATTEMPTS);
      assert.equal(await claimOnly(image, at(60)), undefined);
      const [row] = await queue.get([image]);
      assert.equal(row!.state, "failed");
      assert.match(row!.error!, /stopped unfinished 3 times/);
      assert.equal(row!.errorKind, "transient", "the reading process died, not necessarily the image's fault");
    });

    it("retries a failure that may pass, fails a malformed image at once", async () => {
      const flaky = digest();
      const transient = { kind: "transient", retry: true } as const;
      await queue.enqueue(flaky, at(0));
      let lease = (await claimOnly(flaky, at(1)))!;
      assert.equal(await queue.fail(lease, "blob store unreachable", at(2), transient), "pending");
      lease = (await claimOnly(flaky, at(3)))!;
      assert.ok(lease, "claimed again at once");
      assert.equal(await queue.fail(lease, "blob store unreachable", at(4), transient), "pending");
      lease = (await claimOnly(flaky, at(5)))!;
      assert.equal(await queue.fail(lease, "blob store unreachable again", at(6), transient), "failed");
      const [failed] = await queue.get([flaky]);
      assert.deepEqual(
        [failed!.error, failed!.errorKind],
        ["blob store unreachable again", "transient"],
        "the last error",
      );

      const hostile = digest();
      await queue.enqueue(hostile, at(0));
      lease = (await claimOnly(hostile, at(1)))!;
      assert.equal(await queue.fail(lease, "a tar bomb", at(2), { kind: "image" }), "failed");
      const [row] = await queue.get([hostile]);
      assert.deepEqual([row!.state, row!.attempts, row!.error, row!.errorKind], ["failed", 1, "a tar bomb", "image"]);
    });

    it("queues a transiently failed image again when it is pushed again; a malformed one stays failed", async () => {
      const flaky = digest();
      await queue.enqueue(flaky, at(0));
      for (let i = 0; i < MAX_INVENTORY_ATTEMPTS; i++) {
        const lease = (await claimOnly(flaky, at(1 + i)))!;
        await queue.fail(lease, "storage error", at(1 + i), { kind: "transient", retry: true });
      }
      assert.equal((await queue.get([flaky]))[0]!.state, "failed");
      assert.equal(await queue.enqueue(flaky, at(10)), "pending", "the push queues it again");
      assert.equal(await attemptsOf(flaky), 0, "with its attempts anew");
      const lease = (await claimOnly(flaky, at(11)))!;
      assert.ok(await queue.save(lease, inventory([["zlib", "1.3-r0", "zlib"]]), at(12)));
      assert.equal((await queue.get([flaky]))[0]!.state, "done");

      // Killed three times: the reading process's fault as far as anyone knows, so also retried.
      const killed = digest();
      await queue.enqueue(killed, at(0));
      for (let i = 0; i < MAX_INVENTORY_ATTEMPTS; i++) await claimOnly(killed, at(20 * (i + 1)));
      assert.equal(await claimOnly(killed, at(100)), undefined);
      assert.equal(await queue.enqueue(killed, at(101)), "pending");

      const hostile = digest();
      await queue.enqueue(hostile, at(0));
      const hostileLease = (await claimOnly(hostile, at(1)))!;
      await queue.fail(hostileLease, "a tar bomb", at(2), { kind: "image" });
      assert.equal(await queue.enqueue(hostile, at(3)), "failed", "pushing a malformed image again reads nothing");
      assert.equal(await attemptsOf(hostile), 1);
    });

    it("drops a read's result when the image was requeued meanwhile, then reads it again", async () => {
      const image = digest();
      await queue.enqueue(image, at(0));
      const first = (await claimOnly(image, at(1)))!;
      assert.equal(await queue.requeue(image, at(2)), true);
      assert.equal(await queue.save(first, inventory([["zlib", "1.3-r0", "zlib"]]), at(3)), false, "not saved");
      assert.equal((await queue.get([image]))[0]!.state, "pending");
      const second = (await claimOnly(image, at(4)))!;
      assert.equal(await queue.save(second, inventory([["zlib", "1.3-r1", "zlib"]]), at(5)), true);
      const [row] = await queue.get([image]);
      assert.deepEqual([row!.state, row!.packages[0]!.version], ["done", "1.3-r1"]);
      assert.equal(row!.attempts, 2, "the requeue mid-read kept the superseded read's attempt");
      assert.equal(await queue.requeue(digest(), at(6)), false, "an unknown image is not queued by a requeue");
      assert.equal(await queue.enqueue(image, at(7)), "done", "a push of a read image sees it done");
      assert.equal(await queue.requeue(image, at(8)), true);
      assert.equal(await attemptsOf(image), 0, "a requeue of a finished image starts its attempts anew");
    });

    it("refuses a superseded read's save, renewal, failure and release once another claim took the image", async () => {
      const image = digest();
      await queue.enqueue(image, at(0));
      const first = (await claimOnly(image, at(1)))!;
      // Requeued mid-read (an SBOM attached), then claimed by another reader.
      await queue.requeue(image, at(2));
      const second = (await claimOnly(image, at(3)))!;
      assert.notEqual(second.token, first.token);
      assert.equal(await queue.renew(first, at(4), LEASE_MS), false, "the first reader learns it lost the lease");
      assert.equal(await queue.save(first, inventory([["zlib", "1.3-r0", "zlib"]]), at(5)), false, "not saved");
      assert.equal(await queue.fail(first, "cut short", at(5), { kind: "transient", retry: true }), undefined);
      await queue.release(first);
      assert.equal(await claimOnly(image, at(6)), undefined, "the second reader's lease still holds");
      assert.equal(await queue.renew(second, at(6), LEASE_MS), true);
      assert.equal(await queue.save(second, inventory([["zlib", "1.3-r1", "zlib"]]), at(7)), true);
      assert.equal((await queue.get([image]))[0]!.packages[0]!.version, "1.3-r1");

      // A lease run out (a stalled reader) and claimed elsewhere: the stalled read saves nothing.
      const stalled = digest();
      await queue.enqueue(stalled, at(0));
      const slow = (await claimOnly(stalled, at(1)))!;
      const fast = (await claimOnly(stalled, at(1 + LEASE_MS / 1000 + 1)))!;
      assert.equal(await queue.save(slow, inventory([["zlib", "1.3-r0", "zlib"]]), at(20)), false);
      assert.equal(await queue.save(fast, inventory([["zlib", "1.3-r1", "zlib"]]), at(21)), true);
      assert.equal((await queue.get([stalled]))[0]!.packages[0]!.version, "1.3-r1");
    });

    it("replaces the indexed packages on every save, found by name, origin and purl", async () => {
      const image = digest();
      await queue.enqueue(image, at(0));
      await queue.save((await claimOnly(image, at(1)))!, inventory([["libcrypto3", "3.3.0-r2", "openssl"]]), at(2));
      assert.ok((await queue.digestsWithPackages(["openssl"], [])).includes(image), "by origin");
      assert.ok((await queue.digestsWithPackages(["libcrypto3"], [])).includes(image), "by name");
      assert.ok((await queue.digestsWithPackages([], ["pkg:apk/wolfi/openssl"])).includes(image), "by purl");
      assert.ok(!(await queue.digestsWithPackages([], ["pkg:deb/debian/openssl"])).includes(image), "not another type");
      await queue.requeue(image, at(3));
      await queue.save((await claimOnly(image, at(4)))!, inventory([["busybox", "1.36.1-r6", "busybox"]]), at(5));
      assert.ok(!(await queue.digestsWithPackages(["openssl"], [])).includes(image), "the old packages are gone");
      assert.ok((await queue.digestsWithPackages(["busybox"], [])).includes(image));
    });
  });
}
