// Streaming an image's layers, in order, keeping only the few files an inventory needs (the
// package databases and os-release) as the image's root filesystem would finally hold them:
// a later layer's file replaces an earlier one, `.wh.<name>` deletes <name> (and what is under it)
// from the layers below, `.wh..wh..opq` empties a directory of what the layers below put there.
// Nothing is written to disk and no layer is buffered: each is piped through its decompressor and
// tar-stream, and every entry we do not keep is skipped as it streams by.
import type { Readable } from "node:stream";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { Decompress } from "fzstd";
import { extract as tarExtract, type Header as TarHeader } from "tar-stream";

/** A tar entry's content stream (a streamx Readable): iterable, or drained by resume(). */
interface TarEntry extends AsyncIterable<unknown> {
  resume(): unknown;
  on(event: "end", listener: () => void): unknown;
  on(event: "error", listener: (error: unknown) => void): unknown;
}
import { InventoryError } from "./types.js";
import { ZstdOutline } from "./zstd-frames.js";

export interface LayerLimits {
  /** the largest package database (or os-release) file kept */
  maxPackageDbBytes: number;
  /** all kept files together (status.d/ is one file per package) */
  maxKeptBytes: number;
  /** the layers' tar streams together, once decompressed (a tar bomb ends here) */
  maxDecompressedBytes: number;
  /** tar entries over all layers */
  maxEntries: number;
  /** the largest zstd window (the memory a zstd layer may make us hold) */
  maxZstdWindowBytes: number;
  /** the zstd decoder's work (window bytes allocated or moved) allowed per byte it decodes */
  maxZstdWorkPerByte: number;
  /** the kept files (package databases: status.d/ is one per package) the root filesystem may hold */
  maxKeptFiles: number;
}

/** The zstd work allowed beyond `maxZstdWorkPerByte` per decoded byte, in windows of the largest size. */
const ZSTD_WORK_ALLOWANCE_WINDOWS = 16;

export interface LayerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export const APK_DBS = ["lib/apk/db/installed", "usr/lib/apk/db/installed"] as const;
export const DPKG_STATUS = "var/lib/dpkg/status";
export const DPKG_STATUS_DIR = "var/lib/dpkg/status.d/";
export const OS_RELEASES = ["etc/os-release", "usr/lib/os-release"] as const;
const KEPT_FILES = new Set<string>([...APK_DBS, DPKG_STATUS, ...OS_RELEASES]);
const WATCHED = [...KEPT_FILES, DPKG_STATUS_DIR.slice(0, -1)];

const WHITEOUT_PREFIX = ".wh.";
const OPAQUE_MARKER = ".wh..wh..opq";

/** Whether `path` is one of the files an inventory keeps. */
function isKept(path: string): boolean {
  if (KEPT_FILES.has(path)) return true;
  if (!path.startsWith(DPKG_STATUS_DIR)) return false;
  const name = path.slice(DPKG_STATUS_DIR.length);
  // Distroless keeps `<package>` and `<package>.md5sums` here; only the first is a status stanza.
  return name !== "" && !name.includes("/") && !name.endsWith(".md5sums");
}

/** Whether a change at `path` (a deletion, a non-directory put there) can touch a kept file. */
function touchesKept(path: string): boolean {
  return WATCHED.some((w) => w === path || w.startsWith(`${path}/`) || path.startsWith(`${w}/`));
}

/**
 * A tar entry's path relative to the image root: `./` and leading `/` dropped, `.` components
 * removed. A path with a `..` component is an error: a layer that reaches outside the root is
 * malformed or hostile (runtimes refuse it), so the image's inventory is not trusted either.
 */
function normalizePath(raw: string, layer: string): string {
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes(".."))
    throw new InventoryError(`${layer}: the entry ${JSON.stringify(raw.slice(0, 200))} leaves the image root`);
  return parts.join("/");
}

/** `path` and each directory above it, deepest first ("a/b/c", "a/b", "a"). */
function* selfAndAncestors(path: string): Generator<string> {
  for (let at = path.length; at > 0; at = path.lastIndexOf("/", at - 1)) yield path.slice(0, at);
}

/** Whether `path` is a watched path or a directory above one (a change there reaches beyond one file). */
const isAboveOrAtWatched = (path: string) => WATCHED.some((w) => w === path || w.startsWith(`${path}/`));

/**
 * What one layer changes among the kept files. Whether a file is gone is decided by looking up
 * the file's own path and its few ancestors in sets — never by comparing every file with every
 * removal — and only removals that can reach a file held are recorded, so a layer of many
 * whiteouts costs one lookup each.
 */
class LayerChanges {
  /** the kept files this layer puts, with the order they came in */
  readonly #files = new Map<string, { content: Uint8Array; order: number }>();
  /** whiteouts and non-directories put at or above a kept path: deleted from the layers below */
  readonly #removed = new Set<string>();
  /** non-directories put in this layer, when: they also replace what this layer put there earlier */
  readonly #replaced = new Map<string, number>();
  /** directories made opaque: the layers below contribute nothing under them */
  readonly #opaque = new Set<string>();
  #order = 0;
  /** files this layer adds to those the layers below hold (for the kept-files limit) */
  added = 0;

  constructor(private readonly below: KeptFiles) {}

  put(path: string, content: Uint8Array): void {
    if (!this.#files.has(path) && !this.below.files.has(path)) this.added += 1;
    this.#files.set(path, { content, order: ++this.#order });
  }

  /** A whiteout: `path` (and what is under it) is deleted from the layers below. */
  whiteout(path: string): void {
    if (isAboveOrAtWatched(path) || this.below.files.has(path)) this.#removed.add(path);
  }

  /** A non-directory put at `path`: what was there, below or earlier in this layer, is gone. */
  replace(path: string): void {
    this.whiteout(path);
    if (isAboveOrAtWatched(path) || this.#files.has(path)) this.#replaced.set(path, ++this.#order);
  }

  opaque(dir: string): void {
    // Kept files are at most one level under a watched directory: only these can hide one.
    if (isAboveOrAtWatched(dir)) this.#opaque.add(dir);
  }

  /** A file this layer put and still holds. */
  get(path: string): Uint8Array | undefined {
    const file = this.#files.get(path);
    return file && !this.#replacedSince(path, file.order) ? file.content : undefined;
  }

  #replacedSince(path: string, order: number): boolean {
    for (const p of selfAndAncestors(path)) if ((this.#replaced.get(p) ?? 0) > order) return true;
    return false;
  }

  /** Whether this layer hides a file of the layers below. */
  hidesBelow(path: string): boolean {
    for (const p of selfAndAncestors(path)) {
      if (this.#removed.has(p)) return true;
      if (p !== path && this.#opaque.has(p)) return true;
    }
    return false;
  }

  /** The files this layer leaves, each once. */
  *left(): Generator<[string, Uint8Array]> {
    for (const [path, file] of this.#files) if (!this.#replacedSince(path, file.order)) yield [path, file.content];
  }
}

/** The kept files of the image's root filesystem, layer after layer. */
export class KeptFiles {
  readonly files = new Map<string, Uint8Array>();

  apply(layer: LayerChanges): void {
    for (const path of [...this.files.keys()]) if (layer.hidesBelow(path)) this.files.delete(path);
    for (const [path, content] of layer.left()) this.files.set(path, content);
  }

  get(path: string): Uint8Array | undefined {
    return this.files.get(path);
  }

  under(dir: string): [string, Uint8Array][] {
    return [...this.files].filter(([path]) => path.startsWith(dir)).sort(([a], [b]) => (a < b ? -1 : 1));
  }
}

export interface LayerReadState {
  kept: KeptFiles;
  entries: number;
  decompressedBytes: number;
  keptBytes: number;
}

type Decompressor = Transform | ((source: AsyncIterable<Uint8Array>) => AsyncGenerator<Uint8Array>);

/** How a layer's media type says it is compressed; undefined: not a layer we can read. */
function compressionOf(mediaType: string): "gzip" | "zstd" | "none" | undefined {
  const type = mediaType.split(";")[0]!.trim().toLowerCase();
  if (type.endsWith("+gzip") || type.endsWith(".tar.gzip")) return "gzip";
  if (type.endsWith("+zstd") || type.endsWith(".tar.zstd")) return "zstd";
  if (type.endsWith(".tar") || type.endsWith("v1.tar")) return "none";
  return undefined;
}

/** Foreign (non-distributable) layers live at their URLs, not in a registry, so are not read. */
export function isForeignLayer(mediaType: string): boolean {
  return /foreign|nondistributable/.test(mediaType);
}

// fzstd decodes synchronously, every whole block of what it is given at once; fed in small
// slices, what it hands back per slice stays small (a 4-byte RLE block can stand for 128 KiB).
const ZSTD_SLICE_BYTES = 512;

/**
 * A zstd layer's decoder. fzstd's work is not proportional to what it decodes: it allocates each
 * frame's whole window and moves that window once per block. So the frame and block headers are
 * read first (ZstdOutline): a window above the limit is refused before fzstd allocates it, and
 * the work (window bytes allocated or moved) may exceed `maxZstdWorkPerByte` times the bytes
 * decoded only by a fixed allowance. A real layer's worst (full 128 KiB blocks in an 8 MiB window)
 * moves 64 bytes per byte decoded; a stream of empty blocks is refused after a few.
 */
function zstdDecoder(layer: string, limits: LayerLimits) {
  const allowance = ZSTD_WORK_ALLOWANCE_WINDOWS * limits.maxZstdWindowBytes;
  return async function* (source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    const decoded: Uint8Array[] = [];
    let work = 0;
    /** what the blocks read so far decode to at most (a compressed block: its largest) */
    let promised = 0;
    let decodedBytes = 0;
    const checkWork = (bytes: number) => {
      if (work > limits.maxZstdWorkPerByte * bytes + allowance)
        throw new InventoryError(
          `${layer}: its zstd data makes the decoder move ${work} bytes for ${decodedBytes} decoded (frames or blocks that decode to almost nothing): refused`,
        );
    };
    const outline = new ZstdOutline(layer, limits.maxZstdWindowBytes, {
      frame: (windowBytes) => {
        work += windowBytes;
      },
      block: ({ windowBytes, maxDecodedBytes }) => {
        work += windowBytes;
        promised += maxDecodedBytes;
      },
    });
    const decoder = new Decompress((chunk) => {
      decodedBytes += chunk.length;
      decoded.push(chunk);
    });
    const push = (slice: Uint8Array, final: boolean) => {
      // The headers first: what the slice will cost is checked before fzstd spends it.
      outline.scan(slice);
      checkWork(promised);
      try {
        decoder.push(slice, final);
      } catch (error) {
        throw new InventoryError(`${layer}: the zstd data is corrupt or truncated (${(error as Error).message})`);
      }
      checkWork(decodedBytes);
    };
    for await (const chunk of source) {
      for (let at = 0; at < chunk.length; at += ZSTD_SLICE_BYTES) {
        push(chunk.subarray(at, at + ZSTD_SLICE_BYTES), false);
        while (decoded.length > 0) yield decoded.shift()!;
      }
    }
    push(new Uint8Array(0), true);
    if (!outline.complete)
      throw new InventoryError(`${layer}: the zstd data is corrupt or truncated (it ends mid-frame)`);
    while (decoded.length > 0) yield decoded.shift()!;
  };
}

/** Counts the decompressed tar bytes and stops the layer when the image's total passes the limit. */
function meter(state: LayerReadState, limits: LayerLimits): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      state.decompressedBytes += chunk.length;
      if (state.decompressedBytes > limits.maxDecompressedBytes) {
        done(
          new InventoryError(
            `the layers decompress to more than ${limits.maxDecompressedBytes} bytes (the limit): a tar bomb, or an image too large to read`,
          ),
        );
        return;
      }
      done(null, chunk);
    },
  });
}

async function readEntry(stream: AsyncIterable<unknown>, size: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks, size);
}

/**
 * Streams one layer into `state`: its changes to the kept files are applied once the whole layer
 * has been read (a whiteout in a layer deletes from the layers below it, never from its own).
 * Errors of the layer's data (compression, tar, limits, paths) are InventoryErrors; an error of
 * the blob stream itself is passed on as it is (the store failed, not the image).
 */
export async function readLayer(
  index: number,
  descriptor: LayerDescriptor,
  blob: Readable,
  state: LayerReadState,
  limits: LayerLimits,
): Promise<void> {
  const layer = `layer ${index + 1} (${descriptor.digest})`;
  const compression = compressionOf(descriptor.mediaType);
  if (!compression) {
    blob.destroy();
    throw new InventoryError(`${layer}: unsupported layer media type ${JSON.stringify(descriptor.mediaType)}`);
  }
  const changes = new LayerChanges(state.kept);

  const checkKeptFiles = () => {
    if (state.kept.files.size + changes.added > limits.maxKeptFiles)
      throw new InventoryError(
        `${layer}: the package databases are more than ${limits.maxKeptFiles} files (the limit; status.d/ holds one per package)`,
      );
  };

  const onEntry = async (header: TarHeader, stream: TarEntry): Promise<void> => {
    state.entries += 1;
    if (state.entries > limits.maxEntries)
      throw new InventoryError(`the layers hold more than ${limits.maxEntries} entries (the limit)`);
    const path = normalizePath(header.name, layer);
    const slash = path.lastIndexOf("/");
    const dir = path.slice(0, Math.max(slash, 0));
    const base = path.slice(slash + 1);
    const type = header.type ?? "file";

    if (base === OPAQUE_MARKER) {
      changes.opaque(dir);
    } else if (base.startsWith(WHITEOUT_PREFIX)) {
      const target = (dir ? `${dir}/` : "") + base.slice(WHITEOUT_PREFIX.length);
      if (touchesKept(target)) changes.whiteout(target);
    } else if ((type === "file" || type === "contiguous-file") && isKept(path)) {
      const size = header.size ?? 0;
      if (size > limits.maxPackageDbBytes)
        throw new InventoryError(
          `${layer}: ${path} is ${size} bytes, more than the ${limits.maxPackageDbBytes} allowed for a package database`,
        );
      state.keptBytes += size;
      if (state.keptBytes > limits.maxKeptBytes)
        throw new InventoryError(`the package databases total more than ${limits.maxKeptBytes} bytes (the limit)`);
      changes.put(path, await readEntry(stream, size));
      checkKeptFiles();
      return;
    } else if (type === "link" && isKept(path)) {
      // A hard link is the same file under another name; its target is in this layer or below.
      const target = normalizePath(header.linkname ?? "", layer);
      const content = changes.get(target) ?? (changes.hidesBelow(target) ? undefined : state.kept.get(target));
      if (content) {
        changes.put(path, content);
        checkKeptFiles();
      } else changes.replace(path);
    } else if (type !== "directory" && touchesKept(path)) {
      // A symlink (never followed), device, fifo or file put where a kept file or one of its
      // directories was: what was there is gone, and nothing here is kept.
      changes.replace(path);
    } else if (type === "link") {
      normalizePath(header.linkname ?? "", layer);
    }
    // Skipped as it streams by (tar-stream reads the next entry only once this one is consumed).
    await new Promise<void>((resolve, reject) => {
      stream.on("end", () => resolve());
      stream.on("error", reject);
      stream.resume();
    });
  };

  const extract = tarExtract();
  extract.on("entry", (header, stream, next) => {
    // An entry left unread when the layer fails is destroyed with the layer's error, which the
    // pipeline reports: unheard here, it would be an uncaught exception (the process's end).
    stream.on("error", () => {});
    onEntry(header, stream).then(
      () => next(),
      (error: unknown) => next(error as Error),
    );
  });

  const decompressor: Decompressor | undefined =
    compression === "gzip" ? createGunzip() : compression === "zstd" ? zstdDecoder(layer, limits) : undefined;
  // Which stream an error began in: the first to report it (the others are destroyed with it).
  const origin = new Map<unknown, string>();
  const mark = (stream: NodeJS.EventEmitter, stage: string) =>
    stream.on("error", (error: unknown) => {
      if (!origin.has(error)) origin.set(error, stage);
    });
  mark(blob, "blob");
  if (decompressor instanceof Transform) mark(decompressor, "gzip");
  mark(extract, "tar");

  try {
    if (decompressor instanceof Transform) await pipeline(blob, decompressor, meter(state, limits), extract);
    else if (decompressor) await pipeline(blob, decompressor, meter(state, limits), extract);
    else await pipeline(blob, meter(state, limits), extract);
  } catch (error) {
    if (error instanceof InventoryError) throw error;
    const stage = origin.get(error);
    const message = (error as Error)?.message ?? String(error);
    if (stage === "gzip") throw new InventoryError(`${layer}: the gzip data is corrupt or truncated (${message})`);
    if (stage === "tar") throw new InventoryError(`${layer}: not a readable tar archive (${message})`);
    throw error;
  }
  state.kept.apply(changes);
}
