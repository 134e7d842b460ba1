// The outline of a zstd stream (RFC 8878 §3.1): its frames' headers and its blocks' headers, read
// ahead of the decoder so that what a frame or a block will cost is known — and refused — before
// fzstd spends it. fzstd allocates the frame's whole window when it parses the frame header, and
// copies that window once per decoded block: a tiny hostile layer (1-byte RLE blocks, a huge
// window) costs gigabytes of allocation or minutes of CPU. Nothing is decoded here.
import { InventoryError } from "./types.js";

const ZSTD_MAGIC = 0xfd2fb528;
const SKIPPABLE_MAGIC_MASK = 0xfffffff0;
const SKIPPABLE_MAGIC = 0x184d2a50;
const MAX_BLOCK_BYTES = 128 * 1024;

/** What one block costs fzstd, told as its header is read. */
export interface ZstdBlock {
  /** the frame's window: the bytes fzstd moves once per block */
  windowBytes: number;
  /** raw and RLE blocks: their decoded size; compressed ones: at most this */
  maxDecodedBytes: number;
}

export interface ZstdOutlineEvents {
  /** a frame begins, its window already checked against the limit (fzstd allocates it now) */
  frame(windowBytes: number): void;
  block(block: ZstdBlock): void;
}

type State =
  | { at: "magic" }
  | { at: "skip"; left: number }
  | { at: "frame-header" }
  | { at: "block-header"; windowBytes: number; checksum: boolean }
  | { at: "block-content"; left: number; last: boolean; windowBytes: number; checksum: boolean };

/**
 * Reads a zstd stream's frame and block headers as its bytes pass (`scan` each chunk, in order,
 * before the decoder sees it): a window above `maxWindowBytes`, a reserved bit or block type, or
 * a block larger than its frame allows is an InventoryError naming `layer`.
 */
export class ZstdOutline {
  #state: State = { at: "magic" };
  /** header bytes split across chunks */
  #pending = new Uint8Array(0);

  constructor(
    private readonly layer: string,
    private readonly maxWindowBytes: number,
    private readonly events: ZstdOutlineEvents,
  ) {}

  /** Reads the headers in `chunk` (the next bytes of the stream), telling `events` of each. */
  scan(chunk: Uint8Array): void {
    let data = chunk;
    if (this.#pending.length > 0) {
      data = new Uint8Array(this.#pending.length + chunk.length);
      data.set(this.#pending);
      data.set(chunk, this.#pending.length);
      this.#pending = new Uint8Array(0);
    }
    let at = 0;
    for (;;) {
      const s = this.#state;
      const rest = data.length - at;
      if (s.at === "skip" || s.at === "block-content") {
        const step = Math.min(s.left, rest);
        at += step;
        s.left -= step;
        if (s.left > 0) return;
        if (s.at === "skip") this.#state = { at: "magic" };
        else if (!s.last) this.#state = { at: "block-header", windowBytes: s.windowBytes, checksum: s.checksum };
        else if (s.checksum) this.#state = { at: "skip", left: 4 };
        else this.#state = { at: "magic" };
        continue;
      }
      const available = data.subarray(at);
      if (available.length === 0) return;
      const used = this.#header(s, available);
      if (used === 0) {
        this.#pending = available.slice();
        return;
      }
      at += used;
    }
  }

  /** Whether the stream ended between frames (else it is truncated). */
  get complete(): boolean {
    return this.#state.at === "magic" && this.#pending.length === 0;
  }

  /** Parses the header `s` waits for from `bytes`: the bytes used, 0 when more are needed. */
  #header(s: State, bytes: Uint8Array): number {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (s.at === "magic") {
      if (bytes.length < 4) return 0;
      const magic = view.getUint32(0, true);
      if (magic === ZSTD_MAGIC) {
        this.#state = { at: "frame-header" };
        return 4;
      }
      if ((magic & SKIPPABLE_MAGIC_MASK) >>> 0 === SKIPPABLE_MAGIC) {
        if (bytes.length < 8) return 0;
        this.#state = { at: "skip", left: view.getUint32(4, true) };
        return 8;
      }
      throw this.#corrupt("not a zstd frame");
    }
    if (s.at === "frame-header") {
      const descriptor = bytes[0]!;
      const contentSizeFlag = descriptor >> 6;
      const singleSegment = (descriptor >> 5) & 1;
      if (descriptor & 0x08) throw this.#corrupt("a reserved frame header bit is set");
      const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
      const contentSizeBytes = contentSizeFlag ? 1 << contentSizeFlag : singleSegment;
      const length = 1 + (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes;
      if (bytes.length < length) return 0;
      let windowBytes: number;
      if (!singleSegment) {
        const descriptorByte = bytes[1]!;
        const base = 2 ** (10 + (descriptorByte >> 3));
        windowBytes = base + (base / 8) * (descriptorByte & 7);
      } else {
        // A single-segment frame's window is its content size (little-endian, 1 to 8 bytes).
        const at = 1 + dictionaryBytes;
        windowBytes = 0;
        for (let i = contentSizeBytes - 1; i >= 0; i--) windowBytes = windowBytes * 256 + bytes[at + i]!;
        if (contentSizeBytes === 2) windowBytes += 256;
      }
      if (windowBytes > this.maxWindowBytes)
        throw new InventoryError(
          `${this.layer}: its zstd window is ${windowBytes} bytes, more than the ${this.maxWindowBytes} allowed`,
        );
      this.events.frame(windowBytes);
      this.#state = { at: "block-header", windowBytes, checksum: ((descriptor >> 2) & 1) === 1 };
      return length;
    }
    if (s.at !== "block-header") return 0;
    if (bytes.length < 3) return 0;
    const header = bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16);
    const last = (header & 1) === 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (type === 3) throw this.#corrupt("a reserved block type");
    const maxBlockBytes = Math.min(s.windowBytes, MAX_BLOCK_BYTES);
    if (size > maxBlockBytes)
      throw this.#corrupt(`a block of ${size} bytes in a frame whose blocks hold at most ${maxBlockBytes}`);
    this.events.block({ windowBytes: s.windowBytes, maxDecodedBytes: type === 2 ? maxBlockBytes : size });
    // An RLE block's content is its one repeated byte.
    this.#state = {
      at: "block-content",
      left: type === 1 ? 1 : size,
      last,
      windowBytes: s.windowBytes,
      checksum: s.checksum,
    };
    return 3;
  }

  #corrupt(why: string): InventoryError {
    return new InventoryError(`${this.layer}: the zstd data is corrupt or truncated (${why})`);
  }
}
