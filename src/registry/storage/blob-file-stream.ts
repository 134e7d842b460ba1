// A blob file's bytes (or a range of them) as a Readable. Piped into an HTTP/1 response (what
// Fastify does with a blob GET's stream), it reads into buffers kept for reuse and writes them
// itself: each buffer goes back to the pool only when the response's write callback says the
// socket has taken its bytes. fs.ReadStream allocated a new 256 KiB buffer per read, which glibc
// served from its main arena: under blob traffic that arena grew to 80-100 MiB and stayed, and
// in a standalone server the allocations cost 20-30% of a blob GET's CPU (bench/RESULTS.md). Any
// other consumer (a hash, for-await) gets fresh buffers, as before: a buffer handed to an
// arbitrary writable may still be referenced after its callback (a PassThrough keeps the chunk it
// pushed on), and a reused one would change bytes already sent.
import type { FileHandle } from "node:fs/promises";
import { ServerResponse } from "node:http";
import { Readable } from "node:stream";

/**
 * Blob reads: 256 KiB at a time. 1 MiB buffers were kept by malloc after the load (RSS); 64 KiB
 * cost 10 MiB GETs CPU (more system calls and stream chunks). Measured 2026-11-26 (CPU ms per
 * 10 MiB GET at 16 connections): 64 KiB 11.0, 128 KiB 9.1, 256 KiB 8.1, 1 MiB 19.6 (distribution
 * 7.3–8.4 in the same runs).
 */
export const BLOB_READ_BYTES = 256 * 1024;

/** Free buffers kept for the next read; beyond this many, a returned buffer is left to the GC. */
const POOL_MAX = 32;
const pool: Buffer[] = [];

function takeBuffer(): Buffer {
  return pool.pop() ?? Buffer.allocUnsafeSlow(BLOB_READ_BYTES);
}

function returnBuffer(buffer: Buffer): void {
  if (pool.length < POOL_MAX) pool.push(buffer);
}

let pooledSends = 0;

/** How many buffers the pool holds free now, and how many sends took the pooled path (tests). */
export function blobBufferPool(): { free: number; sends: number } {
  return { free: pool.length, sends: pooledSends };
}

export class BlobFileStream extends Readable {
  readonly #file: FileHandle;
  /** the next byte to read, and the last one to send (inclusive) */
  #position: number;
  readonly #last: number;
  /** set once piped into a response: the send loop reads, and _read does nothing */
  #sending: Promise<void> | undefined;
  /** the fallback's read in progress */
  #reading: Promise<unknown> | undefined;
  #closed: Promise<void> | undefined;
  /** wakes the send loop (a write's callback, or destroy) */
  #wake: (() => void) | undefined;

  /** `last`: the last byte to read (inclusive); the file's bytes from `first` through it. */
  constructor(file: FileHandle, first: number, last: number) {
    super({ highWaterMark: BLOB_READ_BYTES });
    this.#file = file;
    this.#position = first;
    this.#last = last;
  }

  override pipe<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T {
    // Only a fresh stream into an HTTP/1 response takes the pooled path: its write callback runs
    // once the socket has the bytes (or the response is gone), and it keeps no chunk after that.
    // A stream read from already (even its first chunk only buffered) goes on as a Readable.
    if (
      !(destination instanceof ServerResponse) ||
      this.#sending ||
      this.#reading ||
      this.readableDidRead ||
      this.readableLength > 0 ||
      this.readableFlowing !== null
    )
      return super.pipe(destination, options);
    pooledSends++;
    this.#sending = this.#send(destination, options?.end !== false);
    return destination;
  }

  async #send(response: ServerResponse, end: boolean): Promise<void> {
    let inFlight = 0;
    try {
      while (this.#position <= this.#last && !this.destroyed) {
        const buffer = takeBuffer();
        let bytesRead: number;
        try {
          bytesRead = await this.#readInto(buffer);
        } catch (err) {
          returnBuffer(buffer);
          throw err;
        }
        if (bytesRead === 0 || this.destroyed) {
          returnBuffer(buffer);
          break; // the file is shorter than the range: what was there is sent, as fs.ReadStream did
        }
        inFlight++;
        response.write(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead), () => {
          // Called once the socket took the bytes, or with an error once the response is gone;
          // either way nothing refers to the buffer any more. A write whose callback never runs
          // keeps its buffer out of the pool: the GC takes it with the response.
          inFlight--;
          returnBuffer(buffer);
          this.#wakeUp();
        });
        // One chunk on its way out while the next is read: at most two per response.
        while (inFlight >= 2 && !this.destroyed) await new Promise<void>((resolve) => (this.#wake = resolve));
      }
      if (!this.destroyed) {
        if (end) response.end();
        this.push(null);
        this.resume(); // flowing with nothing buffered: 'end' is emitted, which Fastify waits for
      }
    } catch (err) {
      this.destroy(err as Error);
    }
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Reads the next bytes (up to a buffer's worth, within the range) into `buffer`; how many. */
  async #readInto(buffer: Buffer): Promise<number> {
    const wanted = Math.min(buffer.length, this.#last - this.#position + 1);
    const { bytesRead } = await this.#file.read(buffer, 0, wanted, this.#position);
    this.#position += bytesRead;
    return bytesRead;
  }

  override _read(): void {
    if (this.#sending || this.#reading) return;
    if (this.#position > this.#last) {
      this.push(null);
      return;
    }
    const buffer = Buffer.allocUnsafeSlow(Math.min(BLOB_READ_BYTES, this.#last - this.#position + 1));
    this.#reading = this.#readInto(buffer).then(
      (bytesRead) => {
        this.#reading = undefined;
        if (this.destroyed) return;
        if (bytesRead === 0) {
          this.push(null);
          return;
        }
        this.push(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead));
      },
      (err: unknown) => {
        this.#reading = undefined;
        this.destroy(err as Error);
      },
    );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#wakeUp();
    // The file closes once no read of it is in progress (the send loop ends at its next step).
    const busy = this.#sending ?? this.#reading ?? Promise.resolve();
    void busy
      .catch(() => {})
      .then(() => this.#close())
      .then(
        () => callback(error),
        (closeError: unknown) => callback(error ?? (closeError as Error)),
      );
  }

  #close(): Promise<void> {
    this.#closed ??= this.#file.close();
    return this.#closed;
  }
}
