// Real image bytes for the inventory reader's tests and bench: tar layers written with tar-stream's
// pack (any entry a hostile layer may hold: whiteouts, symlinks, hard links, `../` names), gzip
// and zstd made by the system's own `gzip` and `zstd`, and an in-memory ImageSource serving an
// OCI manifest, its config and its blobs by digest, as the registry's store would.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { pack } from "tar-stream";
import type { ImageSource } from "../../src/images/inventory/reader.js";

export interface LayerEntry {
  name: string;
  /** a file's content (default: empty file) */
  content?: string | Uint8Array;
  type?: "file" | "directory" | "symlink" | "link";
  /** a symlink's or hard link's target */
  linkname?: string;
}

/** A tar archive of `entries`, in order. */
export async function tarOf(entries: LayerEntry[]): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  archive.on("data", (c) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    archive.on("end", () => resolve());
    archive.on("error", reject);
  });
  for (const [i, entry] of entries.entries()) {
    // tar-stream packs bodiless entries recursively: a pause now and then keeps its stack short.
    if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve));
    const type = entry.type ?? "file";
    if (type === "file") archive.entry({ name: entry.name, type, mode: 0o644 }, entry.content ?? "");
    else
      archive.entry({ name: entry.name, type, linkname: entry.linkname, mode: type === "directory" ? 0o755 : 0o777 });
  }
  archive.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/** `input` through a command (gzip, zstd) run with `args`, its stdout. */
export function through(command: string, args: string[], input: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(command, args, { encoding: "buffer", maxBuffer: 1 << 30 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
    child.stdin!.end(input);
  });
}

export const gzipOf = (tar: Uint8Array) => through("gzip", ["-c", "-n"], tar);
export const zstdOf = (tar: Uint8Array, args: string[] = []) => through("zstd", ["-c", "-q", ...args], tar);

export const LAYER_TAR = "application/vnd.oci.image.layer.v1.tar";
export const LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";
export const LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd";
export const DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip";

export interface TestLayer {
  mediaType: string;
  bytes: Uint8Array;
}

export const digestOf = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

export interface TestImage {
  layers: TestLayer[];
  config?: Record<string, unknown>;
  sboms?: { artifactType: string; content: Uint8Array }[];
  /** digests the source does not hold (a missing blob) */
  missing?: string[];
  /** the manifest's media type (default OCI) */
  manifestMediaType?: string;
}

export const DEFAULT_CONFIG = {
  architecture: "amd64",
  os: "linux",
  created: "2024-05-01T12:00:00Z",
  config: { User: "65532", Env: ["PATH=/usr/bin"], Entrypoint: ["/usr/bin/app"], Labels: { team: "bulwark" } },
  rootfs: { type: "layers", diff_ids: [] },
};

/** An ImageSource over an image made of `layers`; blobs stream in 64 KiB reads, as from a store. */
export function imageSource(image: TestImage): ImageSource & { configDigest: string; manifestDigest: string } {
  const docker = image.manifestMediaType === "application/vnd.docker.distribution.manifest.v2+json";
  const config = Buffer.from(JSON.stringify(image.config ?? DEFAULT_CONFIG));
  const blobs = new Map<string, Uint8Array>([[digestOf(config), config]]);
  for (const layer of image.layers) blobs.set(digestOf(layer.bytes), layer.bytes);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: image.manifestMediaType ?? "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: docker
          ? "application/vnd.docker.container.image.v1+json"
          : "application/vnd.oci.image.config.v1+json",
        digest: digestOf(config),
        size: config.length,
      },
      layers: image.layers.map((l) => ({ mediaType: l.mediaType, digest: digestOf(l.bytes), size: l.bytes.length })),
    }),
  );
  const missing = new Set(image.missing ?? []);
  return {
    manifest,
    configDigest: digestOf(config),
    manifestDigest: digestOf(manifest),
    async openBlob(digest) {
      const bytes = blobs.get(digest);
      if (!bytes || missing.has(digest)) return undefined;
      return Readable.from(
        (function* () {
          for (let at = 0; at < bytes.length; at += 65536) yield Buffer.from(bytes.subarray(at, at + 65536));
        })(),
      );
    },
    async *sboms() {
      yield* image.sboms ?? [];
    },
  };
}

/** An apk installed database listing `packages` (with the fields a real one has around them). */
export function apkInstalled(
  packages: { name: string; version: string; arch?: string; origin?: string; license?: string }[],
): string {
  return packages
    .map((p) =>
      [
        `C:Q1${createHash("sha1").update(p.name).digest("base64")}`,
        `P:${p.name}`,
        `V:${p.version}`,
        `A:${p.arch ?? "x86_64"}`,
        "S:123456",
        "I:456789",
        `T:${p.name} package`,
        "U:https://wolfi.dev",
        ...(p.license ? [`L:${p.license}`] : []),
        ...(p.origin ? [`o:${p.origin}`] : []),
        "m:Wolfi Maintainers",
        "t:1714564800",
        "D:so:libc.so.6",
        "F:usr/lib",
        `R:lib${p.name}.so`,
        "a:0:0:755",
        "",
      ].join("\n"),
    )
    .join("\n");
}

/** An ImageSource over the image `tag` of an OCI image layout directory (e.g. one umoci wrote). */
export async function layoutSource(dir: string, tag: string): Promise<ImageSource> {
  const { readFile } = await import("node:fs/promises");
  const { createReadStream, existsSync } = await import("node:fs");
  const { join } = await import("node:path");
  const blobPath = (digest: string) => join(dir, "blobs", ...digest.split(":"));
  const index = JSON.parse(await readFile(join(dir, "index.json"), "utf8")) as {
    manifests: { digest: string; annotations?: Record<string, string> }[];
  };
  const entry = index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === tag);
  if (!entry) throw new Error(`no ${tag} in ${dir}`);
  return {
    manifest: await readFile(blobPath(entry.digest)),
    async openBlob(digest) {
      return existsSync(blobPath(digest)) ? createReadStream(blobPath(digest)) : undefined;
    },
    async *sboms() {},
  };
}

/**
 * A zstd stream of `blocks` RLE blocks of `rleBytes` each, in a frame whose window descriptor has
 * exponent `windowExponent` (window 2^(10+e) bytes): a few bytes that make a decoder work hard.
 */
export function rleZstd(windowExponent: number, blocks: number, rleBytes = 1): Uint8Array {
  const bytes = [0x28, 0xb5, 0x2f, 0xfd, 0x00, windowExponent << 3];
  for (let i = 0; i < blocks; i++) {
    const header = (i === blocks - 1 ? 1 : 0) | (1 << 1) | (rleBytes << 3);
    bytes.push(header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff, 0x41);
  }
  return Uint8Array.from(bytes);
}
