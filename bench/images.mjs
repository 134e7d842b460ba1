#!/usr/bin/env node
// The images part of the bench (runnable alone after `npm run build`: `node bench/images.mjs`).
// Not yet part of `npm run bench`: the 1 GiB layer alone takes about a minute to generate.
//
// inventoryBench(): the inventory reader (dist/images/inventory/reader.js) in a child process of
// its own, so its RSS is the reader's: a 300-package, 5-layer gzip image (time per read, RSS), and
// an image with one 1 GiB gzip layer (incompressible content, generated streaming to a temp file,
// never held in memory; the package database at its end, so the whole layer is read) — the RSS
// growth while reading it over the RSS after a warm-up read (goal < 64 MiB).
// Env: BENCH_IMAGES_BIG_LAYER_MIB (default 1024; 0 skips the big layer), BENCH_IMAGES_RUNS
// (default 10: reads of the small image, after 2 unmeasured).
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createGzip } from "node:zlib";
import { pack } from "tar-stream";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const READER = join(HERE, "..", "dist", "images", "inventory", "reader.js");
const MiB = 1 << 20;
const LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";

// ---------------------------------------------------------------------------------------------
// Images on disk: blobs/<hex> files and manifest.json in a temp directory

/** Real Wolfi-like package names (origins repeat: subpackages), 300 of them. */
function apkDatabase(count) {
  const blocks = [];
  for (let i = 0; i < count; i++) {
    const origin = `origin-${Math.floor(i / 3)}`;
    const name = i % 3 === 0 ? origin : `${origin}-sub${i % 3}`;
    blocks.push(
      [
        `C:Q1${createHash("sha1").update(name).digest("base64")}`,
        `P:${name}`,
        `V:${1 + (i % 7)}.${i % 13}.${i % 5}-r${i % 4}`,
        "A:x86_64",
        "S:123456",
        "I:456789",
        `T:${name}`,
        "U:https://wolfi.dev",
        "L:Apache-2.0",
        `o:${origin}`,
        "m:Wolfi",
        "t:1714564800",
        ...Array.from({ length: 20 }, (_, f) => `F:usr/share/${name}/${f}\nR:file${f}\na:0:0:644\nZ:Q1abc=`),
        "",
      ].join("\n"),
    );
  }
  return blocks.join("\n");
}

/** Writes a gzip tar layer of `entries` ({name, size} of fresh incompressible bytes, or {name, content}) to `dir`. */
async function writeLayer(dir, entries) {
  const tmp = join(dir, `layer-${randomBytes(4).toString("hex")}`);
  const archive = pack();
  const hash = createHash("sha256");
  const written = pipeline(
    archive,
    createGzip({ level: 1 }),
    async function* (source) {
      for await (const chunk of source) {
        hash.update(chunk);
        yield chunk;
      }
    },
    createWriteStream(tmp),
  );
  for (const entry of entries) {
    if (entry.content !== undefined) {
      await new Promise((resolve, reject) =>
        archive.entry({ name: entry.name }, entry.content, (e) => (e ? reject(e) : resolve())),
      );
      continue;
    }
    const sink = archive.entry({ name: entry.name, size: entry.size });
    const block = randomBytes(MiB);
    for (let left = entry.size; left > 0; left -= MiB) {
      // Incompressible and never repeated exactly (gzip cannot shrink it), made 1 MiB at a time.
      block.writeUInt32LE(left >>> 0, 0);
      if (!sink.write(block.subarray(0, Math.min(MiB, left)))) await once(sink, "drain");
    }
    sink.end();
    await once(sink, "finish").catch(() => undefined);
  }
  archive.finalize();
  await written;
  const digest = `sha256:${hash.digest("hex")}`;
  await rename(tmp, join(dir, digest.slice(7)));
  return { mediaType: LAYER_GZIP, digest, size: (await stat(join(dir, digest.slice(7)))).size };
}

async function writeImage(dir, layers) {
  const config = Buffer.from(
    JSON.stringify({ architecture: "amd64", os: "linux", config: { User: "65532" }, rootfs: { type: "layers" } }),
  );
  const configDigest = `sha256:${createHash("sha256").update(config).digest("hex")}`;
  await writeFile(join(dir, configDigest.slice(7)), config);
  const manifest = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: config.length },
    layers,
  };
  await writeFile(join(dir, "manifest.json"), JSON.stringify(manifest));
}

/** The 300-package image: 5 layers, about 40 MiB of content, the database in the last. */
async function smallImage(dir) {
  const layers = [];
  layers.push(await writeLayer(dir, [{ name: "etc/os-release", content: "ID=wolfi\nVERSION_ID=20230201\n" }]));
  for (let l = 0; l < 3; l++)
    layers.push(
      await writeLayer(
        dir,
        Array.from({ length: 200 }, (_, i) => ({ name: `usr/lib/l${l}/f${i}`, size: 64 * 1024 })),
      ),
    );
  layers.push(await writeLayer(dir, [{ name: "lib/apk/db/installed", content: apkDatabase(300) }]));
  await writeImage(dir, layers);
}

/** One layer of `mib` MiB: a big file, many small ones, then the database. */
async function bigImage(dir, mib) {
  const big = Math.max(1, Math.floor(mib / 2));
  const small = Array.from({ length: (mib - big) * 4 }, (_, i) => ({
    name: `usr/share/d${i % 64}/f${i}`,
    size: MiB / 4,
  }));
  const layer = await writeLayer(dir, [
    { name: "opt/big.bin", size: big * MiB },
    ...small,
    { name: "etc/os-release", content: "ID=wolfi\n" },
    { name: "lib/apk/db/installed", content: apkDatabase(300) },
  ]);
  await writeImage(dir, [layer]);
}

// ---------------------------------------------------------------------------------------------
// The child: reads the images with the built reader

function sourceOver(dir) {
  return {
    openBlob: async (digest) => {
      const path = join(dir, digest.slice(7));
      return existsSync(path) ? createReadStream(path, { highWaterMark: 64 * 1024 }) : undefined;
    },
    sboms: async () => [],
  };
}

async function child(smallDir, bigDir, runs) {
  const { readInventory } = await import(pathToFileURL(READER).href);
  const read = async (dir) =>
    readInventory({ manifest: await readFile(join(dir, "manifest.json")), ...sourceOver(dir) });
  const result = {};
  for (let i = 0; i < 2; i++) await read(smallDir);
  const times = [];
  let packages = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    packages = (await read(smallDir)).packages.length;
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  global.gc?.();
  result.small = {
    packages,
    medianMs: times[Math.floor(times.length / 2)],
    minMs: times[0],
    maxMs: times[times.length - 1],
    rssMiB: process.memoryUsage().rss / MiB,
  };
  if (bigDir) {
    global.gc?.();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const started = performance.now();
    const inventory = await read(bigDir);
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    result.big = {
      packages: inventory.packages.length,
      uncompressedMiB: inventory.sizeUncompressed / MiB,
      seconds: (performance.now() - started) / 1000,
      baselineRssMiB: baseline / MiB,
      peakRssMiB: peak / MiB,
      growthMiB: (peak - baseline) / MiB,
      maxRssMiB: process.resourceUsage().maxRSS / 1024,
    };
  }
  process.stdout.write(JSON.stringify(result));
}

// ---------------------------------------------------------------------------------------------

export async function inventoryBench({
  bigLayerMiB = Number(process.env.BENCH_IMAGES_BIG_LAYER_MIB ?? 1024),
  runs = Number(process.env.BENCH_IMAGES_RUNS ?? 10),
} = {}) {
  if (!existsSync(READER)) throw new Error(`${READER} is missing: run \`npm run build\` first`);
  console.log("\n== Images: the inventory reader ==");
  const work = await mkdtemp(join(tmpdir(), "bulwark-images-bench-"));
  try {
    const smallDir = join(work, "small");
    const bigDir = bigLayerMiB > 0 ? join(work, "big") : "";
    execFileSync("mkdir", ["-p", smallDir, ...(bigDir ? [bigDir] : [])]);
    await smallImage(smallDir);
    if (bigDir) {
      const started = performance.now();
      await bigImage(bigDir, bigLayerMiB);
      console.log(`(generated the ${bigLayerMiB} MiB layer in ${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
    const proc = spawn(
      process.execPath,
      ["--expose-gc", fileURLToPath(import.meta.url), "--child", smallDir, bigDir, String(runs)],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let out = "";
    proc.stdout.on("data", (c) => (out += c));
    const [code] = await once(proc, "exit");
    if (code !== 0) throw new Error(`the reader's child exited with ${code}`);
    const result = JSON.parse(out);
    const s = result.small;
    console.log(
      `300 packages, 5 gzip layers: ${s.packages} packages read in ${s.medianMs.toFixed(1)} ms (median of ${runs}; min ${s.minMs.toFixed(1)}, max ${s.maxMs.toFixed(1)}); RSS ${s.rssMiB.toFixed(0)} MiB`,
    );
    if (result.big) {
      const b = result.big;
      console.log(
        `one ${bigLayerMiB} MiB gzip layer: ${b.uncompressedMiB.toFixed(0)} MiB of tar read in ${b.seconds.toFixed(1)} s (${(b.uncompressedMiB / b.seconds).toFixed(0)} MiB/s), ${b.packages} packages; RSS ${b.baselineRssMiB.toFixed(0)} → peak ${b.peakRssMiB.toFixed(0)} MiB: grew ${b.growthMiB.toFixed(1)} MiB (goal < 64: ${b.growthMiB < 64 ? "met" : "NOT met"}); maxRSS ${b.maxRssMiB.toFixed(0)} MiB`,
      );
    }
    return result;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === "--child") await child(process.argv[3], process.argv[4], Number(process.argv[5]));
  else await inventoryBench();
}
