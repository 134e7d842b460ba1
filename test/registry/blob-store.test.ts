// The BlobStore contract, run over both implementations: the filesystem store on a temporary
// directory and the S3 store on s3rver (test/support/s3.ts). Then what only the filesystem store
// can show: file modes, constant memory on a large body, and a commit never seen half-done.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import type { BlobStore } from "../../src/registry/storage/blob-store.js";
import { FilesystemBlobStore } from "../../src/registry/storage/fs-blob-store.js";
import { blobBufferPool } from "../../src/registry/storage/blob-file-stream.js";
import { S3BlobStore } from "../../src/registry/storage/s3-blob-store.js";
import { startS3, type TestS3 } from "../support/s3.js";
import { until } from "../support/wait.js";

const MiB = 1024 * 1024;

const sha256 = (buf: Buffer) => `sha256:${createHash("sha256").update(buf).digest("hex")}`;
const sha512 = (buf: Buffer) => `sha512:${createHash("sha512").update(buf).digest("hex")}`;
const body = (...parts: Buffer[]) => Readable.from(parts);

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

/** Digest of a stream's bytes, without holding them; `slow`: one chunk per turn of the event loop. */
async function digestStream(stream: Readable, slow = false): Promise<{ digest: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const part of stream) {
    hash.update(part as Buffer);
    size += (part as Buffer).length;
    if (slow) await new Promise(setImmediate);
  }
  return { digest: `sha256:${hash.digest("hex")}`, size };
}

async function ids(store: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for await (const u of store.listUploads()) {
    assert.ok(u.modified instanceof Date && !Number.isNaN(u.modified.getTime()));
    out.push(u.uploadId);
  }
  return out;
}

/** Stages `parts` one append at a time, checking each answered size. */
async function stage(store: BlobStore, uploadId: string, ...parts: Buffer[]): Promise<number> {
  let offset = 0;
  for (const part of parts) {
    const size = await store.appendUpload(uploadId, offset, body(part));
    assert.equal(size, offset + part.length);
    offset = size;
  }
  return offset;
}

interface Backend {
  name: string;
  start(): Promise<{ store: BlobStore; stop(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: "filesystem",
    async start() {
      const root = await mkdtemp(join(tmpdir(), "bulwark-blobs-"));
      const store = await FilesystemBlobStore.open(root);
      return { store, stop: () => rm(root, { recursive: true, force: true }) };
    },
  },
  {
    name: "s3",
    async start() {
      const s3 = await startS3();
      const store = new S3BlobStore(s3.settings);
      return {
        store,
        async stop() {
          await store.close();
          await s3.close();
        },
      };
    },
  },
];

for (const backend of backends) {
  describe(`BlobStore contract: ${backend.name}`, () => {
    let store: BlobStore;
    let stop: () => Promise<void>;

    before(async () => {
      ({ store, stop } = await backend.start());
    });
    after(async () => {
      await stop?.();
    });

    it("is the kind it says", () => {
      assert.equal(store.kind, backend.name);
    });

    it("stages chunks and commits them to exactly those bytes", async () => {
      const parts = [randomBytes(1000), randomBytes(1), randomBytes(70_000)];
      const all = Buffer.concat(parts);
      const id = randomUUID();
      const size = await stage(store, id, ...parts);
      assert.equal(size, all.length);
      assert.ok((await ids(store)).includes(id));

      const digest = sha256(all);
      assert.equal(await store.has(digest), false);
      await store.commitUpload(id, digest, size);
      assert.equal(await store.has(digest), true);
      assert.equal(sha256(await readAll((await store.open(digest))!)), digest);
      assert.ok(!(await ids(store)).includes(id), "staging is gone after commit");
    });

    it("commits a single chunk, a sha512 digest, and an empty blob", async () => {
      const data = randomBytes(4096);
      const id = randomUUID();
      await stage(store, id, data);
      await store.commitUpload(id, sha512(data), data.length);
      assert.deepEqual(await readAll((await store.open(sha512(data)))!), data);

      const empty = Buffer.alloc(0);
      const id2 = randomUUID();
      assert.equal(await store.appendUpload(id2, 0, body()), 0);
      await store.commitUpload(id2, sha256(empty), 0);
      assert.equal((await readAll((await store.open(sha256(empty)))!)).length, 0);
      assert.ok(!(await ids(store)).includes(id2));
      // nothing staged at all: an empty blob needs no bytes
      await store.commitUpload(randomUUID(), sha512(empty), 0);
      assert.equal((await readAll((await store.open(sha512(empty)))!)).length, 0);
    });

    it("commits several MiB staged in chunks larger than a multipart part", async () => {
      const parts = [randomBytes(6 * MiB), randomBytes(3 * MiB + 17)];
      const all = Buffer.concat(parts);
      const id = randomUUID();
      await stage(store, id, ...parts);
      await store.commitUpload(id, sha256(all), all.length);
      assert.deepEqual(await digestStream((await store.open(sha256(all)))!), {
        digest: sha256(all),
        size: all.length,
      });
    });

    it("answers byte ranges (inclusive)", async () => {
      const data = randomBytes(10_000);
      const digest = sha256(data);
      const id = randomUUID();
      await stage(store, id, data);
      await store.commitUpload(id, digest, data.length);
      const cases: Array<[number, number]> = [
        [0, 0],
        [1234, 5678],
        [data.length - 1, data.length - 1],
        [0, data.length - 1],
      ];
      for (const [start, end] of cases) {
        const got = await readAll((await store.open(digest, { start, end }))!);
        assert.deepEqual(got, data.subarray(start, end + 1), `bytes ${start}-${end}`);
      }
    });

    it("drops the staged bytes when the digest is already stored", async () => {
      const data = randomBytes(2048);
      const digest = sha256(data);
      const first = randomUUID();
      await stage(store, first, data);
      await store.commitUpload(first, digest, data.length);

      const second = randomUUID();
      await stage(store, second, data.subarray(0, 100), data.subarray(100));
      await store.commitUpload(second, digest, data.length);
      assert.ok(!(await ids(store)).includes(second));
      assert.deepEqual(await readAll((await store.open(digest))!), data);
    });

    it("discards bytes staged past the offset the caller recorded (a crash mid-append)", async () => {
      const [a, b, c, d] = [randomBytes(3000), randomBytes(2000), randomBytes(1000), randomBytes(5000)];
      const id = randomUUID();
      await stage(store, id, a, b, c);
      // The database only ever recorded `a`: b and c were appended but never acknowledged.
      assert.equal(await store.appendUpload(id, a.length, body(d)), a.length + d.length);
      const expected = Buffer.concat([a, d]);
      assert.deepEqual(await readAll(store.readUpload(id, expected.length)), expected);
      await store.commitUpload(id, sha256(expected), expected.length);
      assert.deepEqual(await readAll((await store.open(sha256(expected)))!), expected);
    });

    it("stages a body of many small chunks, and of more than a MiB, byte for byte", async () => {
      // Thousands of small chunks and several MiB: the filesystem store writes them in batches.
      const parts = Array.from({ length: 3000 }, (_, i) => randomBytes(1 + ((i * 997) % 2500)));
      const id = randomUUID();
      const whole = Buffer.concat(parts);
      assert.equal(await store.appendUpload(id, 0, body(...parts), { completing: true }), whole.length);
      await store.commitUpload(id, sha256(whole), whole.length);
      assert.deepEqual(await readAll((await store.open(sha256(whole)))!), whole);
    });

    it("a completing append's bytes, dropped or never committed, leave nothing behind for the next append", async () => {
      const [a, b, c] = [randomBytes(3000), randomBytes(2000), randomBytes(1000)];
      const dropped = randomUUID();
      assert.equal(await store.appendUpload(dropped, 0, body(a), { completing: true }), a.length);
      await store.deleteUpload(dropped);
      assert.ok(!(await ids(store)).includes(dropped), "the staging is gone");
      // Not committed (its completion failed): the upload starts over with other bytes.
      const again = randomUUID();
      assert.equal(await store.appendUpload(again, 0, body(b), { completing: true }), b.length);
      assert.equal(await store.appendUpload(again, 0, body(c), { completing: true }), c.length);
      await store.commitUpload(again, sha256(c), c.length);
      assert.deepEqual(await readAll((await store.open(sha256(c)))!), c);
      assert.ok(!(await ids(store)).includes(again), "the staging is gone");
    });

    it("commits only the recorded size of bytes staged past it", async () => {
      const [a, b] = [randomBytes(4000), randomBytes(1500)];
      const id = randomUUID();
      await stage(store, id, a, b);
      // `b` was staged but never recorded: the blob is `a` alone.
      await store.commitUpload(id, sha256(a), a.length);
      assert.deepEqual(await readAll((await store.open(sha256(a)))!), a);
      assert.ok(!(await ids(store)).includes(id), "the staging is gone");
    });

    it("appends again after an append whose body failed", async () => {
      const a = randomBytes(500);
      const id = randomUUID();
      await stage(store, id, a);
      const failing = Readable.from(
        (async function* () {
          yield randomBytes(300);
          throw new Error("client went away");
        })(),
      );
      await assert.rejects(store.appendUpload(id, a.length, failing), /client went away/);
      const b = randomBytes(700);
      assert.equal(await store.appendUpload(id, a.length, body(b)), a.length + b.length);
      assert.deepEqual(await readAll(store.readUpload(id, a.length + b.length)), Buffer.concat([a, b]));
      await store.deleteUpload(id);
    });

    it("refuses an offset past the staged bytes", async () => {
      const id = randomUUID();
      await stage(store, id, randomBytes(100));
      await assert.rejects(store.appendUpload(id, 200, body(randomBytes(10))));
      await assert.rejects(store.appendUpload(randomUUID(), 5, body(randomBytes(10))));
      await store.deleteUpload(id);
    });

    it("reads back the first `size` staged bytes", async () => {
      const parts = [randomBytes(400), randomBytes(600), randomBytes(800)];
      const all = Buffer.concat(parts);
      const id = randomUUID();
      await stage(store, id, ...parts);
      assert.deepEqual(await readAll(store.readUpload(id, all.length)), all);
      assert.deepEqual(await readAll(store.readUpload(id, 700)), all.subarray(0, 700));
      assert.deepEqual(await readAll(store.readUpload(id, 400)), all.subarray(0, 400));
      assert.deepEqual(await readAll(store.readUpload(id, 401)), all.subarray(0, 401));
      assert.deepEqual(await readAll(store.readUpload(id, 1)), all.subarray(0, 1));
      assert.equal((await readAll(store.readUpload(id, 0))).length, 0);
      await assert.rejects(readAll(store.readUpload(id, all.length + 1)), "fewer bytes than asked is an error");
      await store.deleteUpload(id);
    });

    it("deletes idempotently", async () => {
      const data = randomBytes(64);
      const digest = sha256(data);
      const id = randomUUID();
      await stage(store, id, data);
      await store.deleteUpload(id);
      await store.deleteUpload(id);
      await store.deleteUpload(randomUUID());
      assert.ok(!(await ids(store)).includes(id));

      const id2 = randomUUID();
      await stage(store, id2, data);
      await store.commitUpload(id2, digest, data.length);
      await store.delete(digest);
      await store.delete(digest);
      assert.equal(await store.has(digest), false);
      assert.equal(await store.open(digest), undefined);
    });

    it("answers undefined for an absent blob", async () => {
      const digest = sha256(randomBytes(16));
      assert.equal(await store.open(digest), undefined);
      assert.equal(await store.open(digest, { start: 0, end: 3 }), undefined);
      assert.equal(await store.has(digest), false);
    });

    it("lists the uploads with staged bytes", async () => {
      const before = new Date(Date.now() - 5000);
      const staged = [randomUUID(), randomUUID(), randomUUID()];
      for (const id of staged) await stage(store, id, randomBytes(10), randomBytes(10));
      const listed: Array<{ uploadId: string; modified: Date }> = [];
      for await (const u of store.listUploads()) listed.push(u);
      for (const id of staged) {
        const found = listed.filter((u) => u.uploadId === id);
        assert.equal(found.length, 1, `${id} listed once`);
        assert.ok(found[0]!.modified >= before && found[0]!.modified <= new Date(Date.now() + 5000));
      }
      for (const id of staged) await store.deleteUpload(id);
      const left = await ids(store);
      for (const id of staged) assert.ok(!left.includes(id));
    });

    it("refuses digests and upload ids that are not well-formed", async () => {
      const good = randomBytes(8);
      const id = randomUUID();
      const badDigests = [
        "../x",
        "sha256:XYZ",
        `sha256:${"A".repeat(64)}`,
        `sha256:${"a".repeat(63)}`,
        `sha256:${"a".repeat(64)}/../../x`,
        `sha384:${"a".repeat(96)}`,
        `sha512:${"a".repeat(64)}`,
        "",
      ];
      const badIds = ["../x", "x", `${id}/..`, id.toUpperCase(), "", "../../blobs/sha256"];
      for (const digest of badDigests) {
        await assert.rejects(store.has(digest), /digest/, digest);
        await assert.rejects(store.open(digest), /digest/, digest);
        await assert.rejects(store.delete(digest), /digest/, digest);
        await assert.rejects(store.commitUpload(id, digest, 0), /digest/, digest);
      }
      for (const bad of badIds) {
        await assert.rejects(store.appendUpload(bad, 0, body(good)), /upload id/, bad);
        assert.throws(() => store.readUpload(bad, 0), /upload id/, bad);
        await assert.rejects(store.commitUpload(bad, sha256(good), good.length), /upload id/, bad);
        await assert.rejects(store.deleteUpload(bad), /upload id/, bad);
      }
      assert.ok(!(await ids(store)).some((u) => badIds.includes(u)));
    });
  });
}

describe("FilesystemBlobStore", () => {
  let root: string;
  let store: FilesystemBlobStore;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "bulwark-blobs-"));
    store = await FilesystemBlobStore.open(join(root, "store"));
  });
  after(async () => {
    await store?.close();
    await rm(root, { recursive: true, force: true });
  });

  it("keeps everything private: directories 0700, files 0600", async () => {
    const data = randomBytes(100);
    const digest = sha256(data);
    const hex = digest.slice("sha256:".length);
    const id = randomUUID();
    await stage(store, id, data);
    assert.equal((await stat(join(store.root, "uploads", id))).mode & 0o777, 0o600);
    await store.commitUpload(id, digest, data.length);

    const blob = join(store.root, "blobs", "sha256", hex.slice(0, 2), hex);
    assert.equal((await stat(blob)).mode & 0o777, 0o600);
    for (const dir of [
      store.root,
      join(store.root, "uploads"),
      join(store.root, "blobs"),
      join(store.root, "blobs", "sha256"),
      join(store.root, "blobs", "sha256", hex.slice(0, 2)),
    ]) {
      assert.equal((await stat(dir)).mode & 0o777, 0o700, dir);
    }
  });

  it("works on a root made on first use", async () => {
    const lazy = new FilesystemBlobStore(join(root, "lazy", "nested"));
    const data = randomBytes(10);
    const id = randomUUID();
    await stage(lazy, id, data);
    await lazy.commitUpload(id, sha256(data), data.length);
    assert.deepEqual(await readAll((await lazy.open(sha256(data)))!), data);
    assert.equal((await stat(join(root, "lazy", "nested", "blobs"))).mode & 0o777, 0o700);
  });

  it("discards a partial chunk a crash left on disk", async () => {
    const a = randomBytes(1000);
    const id = randomUUID();
    await stage(store, id, a);
    // what a kill -9 mid-append leaves: bytes past the recorded offset
    await writeFile(join(store.root, "uploads", id), randomBytes(777), { flag: "a" });
    const b = randomBytes(10);
    assert.equal(await store.appendUpload(id, a.length, body(b)), a.length + b.length);
    // commit also cuts at `size`, whatever followed it
    await writeFile(join(store.root, "uploads", id), randomBytes(5), { flag: "a" });
    const all = Buffer.concat([a, b]);
    await store.commitUpload(id, sha256(all), all.length);
    assert.deepEqual(await readAll((await store.open(sha256(all)))!), all);
  });

  it("streams a 20 MiB body without holding it in memory", async () => {
    const chunk = randomBytes(64 * 1024);
    const total = 20 * MiB;
    const expected = createHash("sha256");
    for (let n = 0; n < total; n += chunk.length) expected.update(chunk);
    const digest = `sha256:${expected.digest("hex")}`;

    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const id = randomUUID();
    const generated = Readable.from(
      (async function* () {
        for (let n = 0; n < total; n += chunk.length) {
          peak = Math.max(peak, process.memoryUsage().rss);
          // One buffer over and over: no garbage to blur the measure, so holding the body (which
          // copies it) shows as +20 MiB while streaming it stays well under a MiB.
          yield chunk;
        }
      })(),
    );
    assert.equal(await store.appendUpload(id, 0, generated), total);
    peak = Math.max(peak, process.memoryUsage().rss);
    assert.ok(peak - baseline < 12 * MiB, `rss grew by ${((peak - baseline) / MiB).toFixed(1)} MiB`);

    await store.commitUpload(id, digest, total);
    assert.deepEqual(await digestStream((await store.open(digest))!), { digest, size: total });
  });

  it("sends blobs into HTTP responses from reused buffers, byte for byte: concurrent, slow, ranged, aborted and already-read streams", async () => {
    // Three blobs: several read buffers and a short tail, about four, and less than one.
    const blobs = [randomBytes(3 * MiB + 5), randomBytes(MiB), randomBytes(100 * 1024)];
    for (const data of blobs) {
      const id = randomUUID();
      await stage(store, id, data);
      await store.commitUpload(id, sha256(data), data.length);
    }
    // What the registry's blob GET does with the stream (Fastify pipes it into the response).
    const server = http.createServer((req, res) => {
      const url = new URL(req.url!, "http://x");
      const data = blobs[Number(url.searchParams.get("blob"))]!;
      const first = url.searchParams.get("first");
      const range = first === null ? undefined : { start: Number(first), end: Number(url.searchParams.get("last")) };
      void store.open(sha256(data), range).then((stream) => {
        res.writeHead(range ? 206 : 200, {
          "content-length": range ? range.end - range.start + 1 : data.length,
        });
        res.on("close", () => stream!.destroy()); // as Fastify does when the client goes away
        // primed: its first chunk already read into the stream's buffer before the pipe
        if (url.searchParams.has("primed")) {
          stream!.read(0);
          // (no 'readable' listener: that alone would switch the stream out of the pooled path)
          const pipeOnceBuffered = () =>
            stream!.readableLength > 0 ? stream!.pipe(res) : setImmediate(pipeOnceBuffered);
          pipeOnceBuffered();
        } else stream!.pipe(res);
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const port = (server.address() as AddressInfo).port;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 12 });
    const openFiles = () => readdirSync("/proc/self/fd").length;
    const filesBefore = openFiles();
    const stop = async () => {
      agent.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    };
    try {
      /** The answer's status and its body's sha256 (slow: one chunk per turn of the event loop). */
      const fetchDigest = async (query: string, slow: boolean) => {
        const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
          http.get({ host: "127.0.0.1", port, path: `/?${query}`, agent }, resolve).on("error", reject),
        );
        return { status: res.statusCode!, digest: (await digestStream(res, slow)).digest };
      };
      // Ranges that start and end inside read buffers, and one inside a single buffer.
      const ranges: Array<[number, number, number]> = [
        [0, 262_143, 786_433],
        [0, 1, 3 * MiB + 4],
        [1, 1000, 1000],
        [2, 0, 100 * 1024 - 1],
      ];
      const jobs: Array<Promise<void>> = [];
      for (let round = 0; round < 4; round++) {
        blobs.forEach((data, i) =>
          jobs.push(
            fetchDigest(`blob=${i}`, (round + i) % 2 === 0).then(({ status, digest }) => {
              assert.equal(status, 200);
              assert.equal(digest, sha256(data), `blob ${i}, round ${round}`);
            }),
          ),
        );
        for (const [i, first, last] of ranges)
          jobs.push(
            fetchDigest(`blob=${i}&first=${first}&last=${last}`, round % 2 === 1).then(({ status, digest }) => {
              assert.equal(status, 206);
              assert.equal(digest, sha256(blobs[i]!.subarray(first, last + 1)), `blob ${i} bytes ${first}-${last}`);
            }),
          );
        jobs.push(
          fetchDigest("blob=0&primed=1", false).then(({ status, digest }) => {
            assert.equal(status, 200);
            assert.equal(digest, sha256(blobs[0]!), "a stream read from before the pipe");
          }),
        );
        // A client that leaves after the first bytes: its stream stops and its file closes.
        jobs.push(
          new Promise<void>((resolve, reject) => {
            const req = http.get({ host: "127.0.0.1", port, path: "/?blob=0" }, (res) => {
              res.once("data", () => {
                req.destroy();
                resolve();
              });
            });
            req.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? resolve() : reject(err)));
          }),
        );
      }
      await Promise.all(jobs);
    } finally {
      await stop();
    }
    // Buffers came back to the pool from the responses' write callbacks (the pooled path ran).
    assert.ok(blobBufferPool().free > 0);
    await until(
      () => openFiles() <= filesBefore,
      () => `open files: ${openFiles()}, before ${filesBefore}`,
    );
  });

  it("never shows a blob half-written", async () => {
    const data = randomBytes(8 * MiB);
    const digest = sha256(data);
    const id = randomUUID();
    await stage(store, id, data.subarray(0, 3 * MiB), data.subarray(3 * MiB));

    let absent = 0;
    let whole = 0;
    const look = async () => {
      const stream = await store.open(digest);
      if (stream === undefined) return void absent++;
      assert.deepEqual(await digestStream(stream), { digest, size: data.length }, "a reader saw a partial blob");
      whole++;
    };
    let done = false;
    const commit = store.commitUpload(id, digest, data.length).finally(() => (done = true));
    while (!done) {
      await look();
      await new Promise((r) => setImmediate(r));
    }
    await commit;
    await look();
    assert.ok(whole > 0 && absent + whole > 1, `looked while committing (${absent} absent, ${whole} whole)`);
  });

  it("a commit waits for an append to the same upload still writing (its bytes never land in the blob)", async () => {
    const first = Buffer.alloc(1024, "a");
    const id = randomUUID();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // A chunk that sends its first KiB, then waits: a slow client's PATCH.
    const slow = Readable.from(
      (async function* () {
        yield first;
        await held;
        yield Buffer.alloc(1024, "b");
      })(),
    );
    const appending = store.appendUpload(id, 0, slow);
    const committing = store.commitUpload(id, sha256(first), first.length);
    // While the append is held the commit must not end, however long it is given (here: a while).
    const outcome = await Promise.race([
      committing.then(
        () => "committed",
        (err: Error) => `failed: ${err.message}`,
      ),
      new Promise((r) => setTimeout(r, 300, "waiting")),
    ]);
    assert.equal(outcome, "waiting", "the commit did not wait for the append");
    release();
    assert.equal(await appending, 2048, "the append ran to its end");
    await committing;
    const stream = await store.open(sha256(first));
    assert.ok(stream);
    assert.deepEqual(await readAll(stream), first, "the blob is exactly its bytes");
  });

  it("lays blobs out by algorithm and prefix, uploads by id", async () => {
    const data = randomBytes(32);
    const digest = sha512(data);
    const hex = digest.slice("sha512:".length);
    const id = randomUUID();
    await stage(store, id, data);
    assert.deepEqual(await readdir(join(store.root, "uploads")), [id]);
    await store.commitUpload(id, digest, data.length);
    assert.deepEqual(await readdir(join(store.root, "blobs", "sha512", hex.slice(0, 2))), [hex]);
    assert.deepEqual(await readdir(join(store.root, "uploads")), []);
  });
});

describe("S3BlobStore", () => {
  let s3: TestS3;
  let store: S3BlobStore;
  let client: S3Client;

  before(async () => {
    s3 = await startS3({ prefix: "registry" });
    store = new S3BlobStore(s3.settings);
    const { endpoint, region, forcePathStyle, accessKeyId, secretAccessKey } = s3.settings;
    client = new S3Client({
      endpoint,
      region,
      forcePathStyle,
      credentials: { accessKeyId: accessKeyId!, secretAccessKey: secretAccessKey! },
    });
  });
  after(async () => {
    await store?.close();
    client?.destroy();
    await s3?.close();
  });

  const keys = async () =>
    ((await client.send(new ListObjectsV2Command({ Bucket: s3.settings.bucket }))).Contents ?? []).map((o) => o.Key);

  it("keeps chunks and blobs under the prefix, one object per chunk", async () => {
    const parts = [randomBytes(10), randomBytes(20)];
    const all = Buffer.concat(parts);
    const digest = sha256(all);
    const id = randomUUID();
    await stage(store, id, ...parts);
    assert.deepEqual(await keys(), [
      `registry/uploads/${id}/0000000000000000`,
      `registry/uploads/${id}/0000000000000010`,
    ]);
    await store.commitUpload(id, digest, all.length);
    assert.deepEqual(await keys(), [`registry/blobs/sha256/${digest.slice("sha256:".length)}`]);
    await store.delete(digest);
    assert.deepEqual(await keys(), []);
  });

  it("refuses half a set of credentials", () => {
    assert.throws(() => new S3BlobStore({ region: "us-east-1", bucket: "b", accessKeyId: "x" }), /together/);
  });
});
