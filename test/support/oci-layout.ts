// Real OCI image layouts for interoperability tests, built with umoci (the reference tooling):
// two layers, a config with labels, and manifest annotations. Also reads a layout back so a copy
// made by another tool can be compared blob for blob.
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { HANG_MS } from "./wait.js";

const exec = promisify(execFile);

export const LAYOUT_ANNOTATIONS = {
  "org.opencontainers.image.title": "bulwark interop",
  "org.opencontainers.image.vendor": "bulwark tests",
} as const;
export const LAYOUT_LABELS = { "dev.bulwark.test": "interop" } as const;

export interface LayoutImage {
  /** the layout directory (use as `oci:<dir>:<tag>`) */
  dir: string;
  tag: string;
  manifestDigest: string;
  manifest: Buffer;
  config: Buffer;
  layerDigests: string[];
}

async function umoci(...args: string[]): Promise<void> {
  await exec("umoci", args, { timeout: HANG_MS });
}

/**
 * A fresh layout in `dir` holding one image under `tag`. Each call writes new random content, so
 * two layouts never share layer digests. `--rootless` lets non-root developers run it too.
 */
export async function buildOciLayout(dir: string, tag = "v1"): Promise<LayoutImage> {
  const rootfs = `${dir}.rootfs`;
  mkdirSync(join(rootfs, "etc"), { recursive: true });
  mkdirSync(join(rootfs, "app", "lib"), { recursive: true });
  writeFileSync(join(rootfs, "etc", "motd"), `bulwark interop ${randomBytes(8).toString("hex")}\n`);
  writeFileSync(join(rootfs, "etc", "os-release"), 'ID=bulwark-test\nNAME="Bulwark test image"\n');
  // Incompressible, so the layer is large enough to be sent in more than one read.
  writeFileSync(join(rootfs, "app", "lib", "payload.bin"), randomBytes(300_000));
  writeFileSync(join(rootfs, "app", "run.sh"), "#!/bin/sh\necho hello\n", { mode: 0o755 });

  const image = `${dir}:${tag}`;
  await umoci("init", "--layout", dir);
  await umoci("new", "--image", image);
  await umoci("insert", "--rootless", "--image", image, join(rootfs, "etc"), "/etc");
  await umoci("insert", "--rootless", "--image", image, join(rootfs, "app"), "/app");
  await umoci(
    "config",
    "--image",
    image,
    "--architecture",
    "amd64",
    "--os",
    "linux",
    "--config.cmd",
    "/app/run.sh",
    ...Object.entries(LAYOUT_LABELS).flatMap(([k, v]) => ["--config.label", `${k}=${v}`]),
    ...Object.entries(LAYOUT_ANNOTATIONS).flatMap(([k, v]) => ["--manifest.annotation", `${k}=${v}`]),
  );
  // Each umoci step leaves its superseded manifest and config behind; keep only the image's blobs.
  await umoci("gc", "--layout", dir);

  const manifestDigest = layoutManifestDigest(dir, tag);
  const manifest = readBlob(dir, manifestDigest);
  const parsed = JSON.parse(manifest.toString("utf8")) as { config: { digest: string }; layers: { digest: string }[] };
  return {
    dir,
    tag,
    manifestDigest,
    manifest,
    config: readBlob(dir, parsed.config.digest),
    layerDigests: parsed.layers.map((l) => l.digest),
  };
}

export function readBlob(dir: string, digest: string): Buffer {
  const [algorithm, hex] = digest.split(":");
  return readFileSync(join(dir, "blobs", algorithm!, hex!));
}

/** The digest of the manifest `index.json` names `tag` (org.opencontainers.image.ref.name). */
export function layoutManifestDigest(dir: string, tag: string): string {
  const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as {
    manifests: { digest: string; annotations?: Record<string, string> }[];
  };
  const entry = index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === tag);
  if (!entry) throw new Error(`no manifest tagged ${tag} in ${dir}/index.json`);
  return entry.digest;
}

/** Every blob file of a layout by its digest, with its bytes. */
export function layoutBlobs(dir: string): Map<string, Buffer> {
  const blobs = new Map<string, Buffer>();
  for (const algorithm of readdirSync(join(dir, "blobs"))) {
    for (const hex of readdirSync(join(dir, "blobs", algorithm)))
      blobs.set(`${algorithm}:${hex}`, readFileSync(join(dir, "blobs", algorithm, hex)));
  }
  return blobs;
}
