// Random identifiers (uids, trace ids) as hex, from a pool of random bytes filled 4 KiB at a
// time: one randomBytes call per identifier cost a pull ~4% of its CPU. The bytes are the same
// CSPRNG's; secrets still take their own randomBytes, so none sits in this shared pool.
import { randomFillSync } from "node:crypto";

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

/** `bytes` random bytes (at most 256) as 2 × bytes hex digits. */
export function randomHex(bytes: number): string {
  if (bytes > 256 || bytes < 1) throw new RangeError(`randomHex: ${bytes} bytes`);
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString("hex", offset, offset + bytes);
  offset += bytes;
  return hex;
}
