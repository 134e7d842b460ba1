// Real container images built in the test: layers are tar archives (tar-stream) of the files a
// test names — an apk database, a dpkg status, os-release, whiteouts, links, or hostile entries —
// compressed with gzip (node:zlib) or zstd (the zstd tool), or given as raw bytes; written as an
// OCI image layout by hand (blobs by digest, index.json), one platform or an index of several,
// and pushed with skopeo. `waitForInventory` waits for the server's background read of an image.
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createWriteStream, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { pack, type Header } from "tar-stream";

type Headers = Partial<Header> & Pick<Header, "name">;
import { InventoriesRepository, type InventoryRow } from "../../src/images/storage/inventories.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import type { Run } from "./skopeo.js";
import { until } from "./wait.js";

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";
export const LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd";
export const LAYER_TAR = "application/vnd.oci.image.layer.v1.tar";

/** One entry of a layer. */
export type LayerEntry =
  | { path: string; content: string | Uint8Array; mode?: number }
  /** a file of `size` bytes streamed into the layer (random: incompressible; else zeros) */
  | { path: string; size: number; random?: boolean }
  | { path: string; symlink: string }
  | { path: string; hardlink: string }
  | { path: string; directory: true }
  /** deletes `path` from the layers below (an OCI whiteout: `.wh.<name>`) */
  | { path: string; whiteout: true }
  /** hides everything below the directory `path` in the layers below (`.wh..wh..opq`) */
  | { path: string; opaque: true }
  /** any tar header, as is (absurd sizes, odd types, `../` names) */
  | { header: Headers; body?: Uint8Array };

export interface LayerSpec {
  entries?: LayerEntry[];
  /** shorthand for file entries */
  files?: Record<string, string | Uint8Array>;
  /** default gzip */
  compression?: "gzip" | "zstd" | "none";
  /** the layer blob as is, instead of a tar built from the entries (a truncated gzip, garbage) */
  bytes?: Uint8Array;
  /** the descriptor's media type (default: by the compression) */
  mediaType?: string;
}

export interface PlatformSpec {
  layers: LayerSpec[];
  architecture?: string;
  os?: string;
  variant?: string;
  /** ISO time; default a fixed one */
  created?: string;
  /** the config's `config` object (Env, Cmd, Labels, ...) */
  config?: Record<string, unknown>;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface BuiltPlatform {
  digest: string;
  manifest: Buffer;
  config: Buffer;
  configDigest: string;
  layers: (Descriptor & { uncompressedSize: number })[];
  platform: { architecture: string; os: string; variant?: string };
}

export interface BuiltImage {
  /** the layout directory (`oci:<dir>:<tag>`) */
  dir: string;
  tag: string;
  /** the top manifest's digest (the index's, for a multi-platform image) */
  digest: string;
  mediaType: string;
  platforms: BuiltPlatform[];
}

const sha256 = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** Counts and hashes what passes. */
function hashing(): Transform & { digest(): string; size(): number } {
  const hash = createHash("sha256");
  let size = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  }) as Transform & { digest(): string; size(): number };
  let digest: string | undefined;
  t.digest = () => (digest ??= `sha256:${hash.digest("hex")}`);
  t.size = () => size;
  return t;
}

function headersOf(entry: LayerEntry): { header: Headers; body?: Uint8Array; stream?: number; random?: boolean }[] {
  const mtime = new Date("2024-01-01T00:00:00Z");
  if ("header" in entry) return [{ header: { ...entry.header, mtime: entry.header.mtime ?? mtime }, body: entry.body }];
  const path = entry.path.replace(/^\/+/, "");
  const slash = path.lastIndexOf("/");
  const dir = slash < 0 ? "" : path.slice(0, slash + 1);
  const base = path.slice(slash + 1);
  if ("content" in entry) {
    const body = typeof entry.content === "string" ? Buffer.from(entry.content) : entry.content;
    return [{ header: { name: path, mode: entry.mode ?? 0o644, mtime, size: body.length }, body }];
  }
  if ("size" in entry)
    return [{ header: { name: path, mode: 0o644, mtime, size: entry.size }, stream: entry.size, random: entry.random }];
  if ("symlink" in entry) return [{ header: { name: path, type: "symlink", linkname: entry.symlink, mtime } }];
  if ("hardlink" in entry) return [{ header: { name: path, type: "link", linkname: entry.hardlink, mtime } }];
  if ("directory" in entry) return [{ header: { name: path, type: "directory", mode: 0o755, mtime } }];
  if ("whiteout" in entry)
    return [{ header: { name: `${dir}.wh.${base}`, mode: 0o644, mtime, size: 0 }, body: new Uint8Array(0) }];
  return [
    {
      header: { name: `${path.replace(/\/$/, "")}/.wh..wh..opq`, mode: 0o644, mtime, size: 0 },
      body: new Uint8Array(0),
    },
  ];
}

/** Streams `size` bytes into a tar entry, a MiB at a time. */
async function fill(sink: NodeJS.WritableStream, size: number, random: boolean): Promise<void> {
  const zeros = Buffer.alloc(1 << 20);
  for (let left = size; left > 0;) {
    const n = Math.min(left, 1 << 20);
    const chunk = random ? randomBytes(n) : zeros.subarray(0, n);
    left -= n;
    if (!sink.write(chunk)) await once(sink, "drain");
  }
  sink.end();
}

async function writeTar(entries: LayerEntry[], out: NodeJS.WritableStream): Promise<void> {
  const tar = pack();
  const piped = pipeline(tar, out as unknown as NodeJS.WritableStream);
  for (const entry of entries)
    for (const { header, body, stream, random } of headersOf(entry)) {
      if (stream !== undefined) {
        let failed: Error | null | undefined;
        const sink = tar.entry(header, (err) => (failed = err));
        await fill(sink, stream, random === true);
        if (failed) throw failed;
      } else
        await new Promise<void>((resolve, reject) =>
          tar.entry(header, Buffer.from(body ?? new Uint8Array(0)), (err) => (err ? reject(err) : resolve())),
        );
    }
  tar.finalize();
  await piped;
}

/** Writes a blob into the layout from a stream; its descriptor. */
async function blobFrom(
  dir: string,
  source: Readable,
  compress?: Transform,
): Promise<{ digest: string; size: number; rawSize: number }> {
  const blobs = join(dir, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const temporary = join(blobs, `.tmp-${randomBytes(6).toString("hex")}`);
  const raw = hashing();
  const stored = hashing();
  await pipeline(source, raw, ...(compress ? [compress] : []), stored, createWriteStream(temporary));
  renameSync(temporary, join(blobs, stored.digest().slice("sha256:".length)));
  return { digest: stored.digest(), size: stored.size(), rawSize: raw.size() };
}

function writeBlob(dir: string, bytes: Uint8Array): Descriptor & { digest: string } {
  const blobs = join(dir, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const digest = sha256(bytes);
  writeFileSync(join(blobs, digest.slice("sha256:".length)), bytes);
  return { mediaType: "", digest, size: bytes.length };
}

async function buildLayer(
  dir: string,
  spec: LayerSpec,
): Promise<Descriptor & { uncompressedSize: number; diffId: string }> {
  const compression = spec.compression ?? "gzip";
  const mediaType =
    spec.mediaType ?? (compression === "gzip" ? LAYER_GZIP : compression === "zstd" ? LAYER_ZSTD : LAYER_TAR);
  if (spec.bytes) {
    const d = writeBlob(dir, spec.bytes);
    return { ...d, mediaType, uncompressedSize: spec.bytes.length, diffId: d.digest };
  }
  const entries = [
    ...Object.entries(spec.files ?? {}).map(([path, content]) => ({ path, content })),
    ...(spec.entries ?? []),
  ];
  const tarStream = new PassThrough();
  const diff = hashing();
  const writing = writeTar(entries, tarStream);
  if (compression !== "zstd") {
    const compress = compression === "gzip" ? createGzip({ level: 1 }) : undefined;
    const [blob] = await Promise.all([blobFrom(dir, tarStream.pipe(diff), compress), writing]);
    return { mediaType, digest: blob.digest, size: blob.size, uncompressedSize: blob.rawSize, diffId: diff.digest() };
  }
  // zstd: the tar is written out, then compressed by the zstd tool.
  const tarFile = join(dir, `.tar-${randomBytes(6).toString("hex")}`);
  await Promise.all([pipeline(tarStream, diff, createWriteStream(tarFile)), writing]);
  const zstd = spawn("zstd", ["-q", "-c", "-3", tarFile], { stdio: ["ignore", "pipe", "inherit"] });
  const [blob] = await Promise.all([blobFrom(dir, zstd.stdout), once(zstd, "close")]);
  rmSync(tarFile);
  return { mediaType, digest: blob.digest, size: blob.size, uncompressedSize: diff.size(), diffId: diff.digest() };
}

async function buildPlatform(dir: string, spec: PlatformSpec): Promise<BuiltPlatform> {
  const layers = [];
  for (const layer of spec.layers) layers.push(await buildLayer(dir, layer));
  const platform = {
    architecture: spec.architecture ?? "amd64",
    os: spec.os ?? "linux",
    ...(spec.variant ? { variant: spec.variant } : {}),
  };
  const config = Buffer.from(
    JSON.stringify({
      created: spec.created ?? "2024-05-01T12:00:00Z",
      ...platform,
      config: spec.config ?? { Env: ["PATH=/usr/bin:/bin"], Cmd: ["/bin/sh"] },
      rootfs: { type: "layers", diff_ids: layers.map((l) => l.diffId) },
      history: layers.map(() => ({ created_by: "bulwark test" })),
    }),
  );
  const configBlob = writeBlob(dir, config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: OCI_CONFIG, digest: configBlob.digest, size: configBlob.size },
      layers: layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.size })),
    }),
  );
  const manifestBlob = writeBlob(dir, manifest);
  return {
    digest: manifestBlob.digest,
    manifest,
    config,
    configDigest: configBlob.digest,
    layers: layers.map(({ diffId: _, ...l }) => l),
    platform,
  };
}

/**
 * An OCI layout in `dir` holding one image under `tag`: a single platform, or an index of each
 * platform given (a multi-arch image).
 */
export async function buildImage(dir: string, spec: PlatformSpec | PlatformSpec[], tag = "v1"): Promise<BuiltImage> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  const specs = Array.isArray(spec) ? spec : [spec];
  const platforms: BuiltPlatform[] = [];
  for (const s of specs) platforms.push(await buildPlatform(dir, s));
  let top: Descriptor;
  if (Array.isArray(spec)) {
    const index = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: platforms.map((p) => ({
          mediaType: OCI_MANIFEST,
          digest: p.digest,
          size: p.manifest.length,
          platform: p.platform,
        })),
      }),
    );
    top = { ...writeBlob(dir, index), mediaType: OCI_INDEX };
  } else top = { mediaType: OCI_MANIFEST, digest: platforms[0]!.digest, size: platforms[0]!.manifest.length };
  writeFileSync(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [{ ...top, annotations: { "org.opencontainers.image.ref.name": tag } }],
    }),
  );
  return { dir, tag, digest: top.digest, mediaType: top.mediaType, platforms };
}

/** `skopeo copy` of a built image to `docker://<host>/<repository>:<tag>`, digests preserved (every platform). */
export function pushImage(
  skopeo: (...args: string[]) => Promise<Run>,
  image: BuiltImage,
  target: { host: string; repository: string; creds: string; tag?: string },
): Promise<Run> {
  return skopeo(
    "copy",
    "--all",
    "--preserve-digests",
    "--dest-tls-verify=false",
    "--dest-creds",
    target.creds,
    `oci:${image.dir}:${image.tag}`,
    `docker://${target.host}/${target.repository}:${target.tag ?? image.tag}`,
  );
}

/** An apk database (`lib/apk/db/installed`) listing `packages`. */
export function apkInstalled(
  packages: { name: string; version: string; arch?: string; origin?: string; license?: string }[],
): string {
  return packages
    .map((p) =>
      [
        `C:Q1${createHash("sha1")
          .update(p.name + p.version)
          .digest("base64")}`,
        `P:${p.name}`,
        `V:${p.version}`,
        `A:${p.arch ?? "x86_64"}`,
        `S:1024`,
        `I:4096`,
        `T:${p.name} package`,
        `U:https://example.invalid/${p.name}`,
        `L:${p.license ?? "MIT"}`,
        `o:${p.origin ?? p.name}`,
        `m:Wolfi`,
        `t:1700000000`,
        `F:usr/share/doc/${p.name}`,
        `R:README`,
      ].join("\n"),
    )
    .map((block) => `${block}\n\n`)
    .join("");
}

/** A dpkg status file listing `packages`. */
export function dpkgStatus(
  packages: { name: string; version: string; arch?: string; source?: string; status?: string }[],
): string {
  return packages
    .map((p) =>
      [
        `Package: ${p.name}`,
        `Status: ${p.status ?? "install ok installed"}`,
        `Priority: optional`,
        `Section: libs`,
        `Installed-Size: 100`,
        `Maintainer: Debian <debian@example.invalid>`,
        `Architecture: ${p.arch ?? "amd64"}`,
        ...(p.source ? [`Source: ${p.source}`] : []),
        `Version: ${p.version}`,
        `Description: ${p.name}`,
        ` A test package.`,
      ].join("\n"),
    )
    .map((block) => `${block}\n\n`)
    .join("");
}

/** os-release for `id` and `versionId`. */
export function osRelease(id: string, versionId = ""): string {
  return `ID=${id}\n${versionId ? `VERSION_ID=${versionId}\n` : ""}NAME="${id}"\n`;
}

/** The inventory row of `digest`. */
export async function inventoryOf(server: { db: unknown }, digest: string): Promise<InventoryRow | undefined> {
  const [row] = await new InventoriesRepository(imagesDb(server.db as never)).get([digest]);
  return row;
}

/**
 * The inventory row of `digest` once its read ended (done or failed; `states` to wait for
 * others), polling the table: the read happens in the background after the push.
 */
export async function waitForInventory(
  server: { db: unknown },
  digest: string,
  states: readonly string[] = ["done", "failed"],
): Promise<InventoryRow> {
  let last: InventoryRow | undefined;
  return until(
    async () => {
      last = await inventoryOf(server, digest);
      return last && states.includes(last.state) ? last : undefined;
    },
    () =>
      `inventory of ${digest} in state ${states.join("|")} (last: ${JSON.stringify(last && { state: last.state, attempts: last.attempts, error: last.error })})`,
    { everyMs: 25 },
  );
}
