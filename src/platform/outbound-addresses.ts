// Outbound connections to addresses a caller chose (an upstream issuer a token names, an events
// subscription's sink): what kind of address an IP is, and a `lookup` for node:http(s) that checks
// every resolved address when the socket connects, so DNS rebinding between a check and the
// connection cannot reach a refused address. Callers decide which categories they refuse; IP
// literals skip `lookup`, so callers check those themselves (addressCategory) before connecting.
import { promises as dns } from "node:dns";
import { isIP, type LookupFunction } from "node:net";

/** Name resolution: every address of a name. */
export type Resolve = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** The system resolver (what node:http would use), every address. */
export const systemResolve: Resolve = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

export type AddressCategory =
  "public" | "loopback" | "private" | "link-local" | "cgnat" | "multicast" | "unspecified" | "reserved";

function parseIPv4(s: string): number[] | undefined {
  const parts = s.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.map(Number);
}

function parseIPv6(s: string): number[] | undefined {
  let text = s.replace(/%.*$/, "");
  let tail: number[] = [];
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = parseIPv4(dotted[2]!);
    if (!v4) return undefined;
    tail = v4;
    // "::ffff:1.2.3.4" → "::ffff", "::1.2.3.4" → "::"
    text = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head.concat(rest).every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return undefined;
  const wanted = 8 - tail.length / 2;
  const fill = halves.length === 2 ? wanted - head.length - rest.length : 0;
  if (fill < 0 || (halves.length === 1 && head.length !== wanted)) return undefined;
  const bytes = [...head, ...Array<string>(fill).fill("0"), ...rest]
    .map((g) => parseInt(g, 16))
    .flatMap((g) => [g >> 8, g & 0xff]);
  return [...bytes, ...tail];
}

function inPrefix(bytes: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const take = Math.min(8, bits - i);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((bytes[i / 8] ?? 0) & mask) !== ((prefix[i / 8] ?? 0) & mask)) return false;
  }
  return true;
}

const V4_RANGES: [number[], number, AddressCategory][] = [
  [[0, 0, 0, 0], 8, "unspecified"],
  [[10, 0, 0, 0], 8, "private"],
  [[100, 64, 0, 0], 10, "cgnat"],
  [[127, 0, 0, 0], 8, "loopback"],
  [[169, 254, 0, 0], 16, "link-local"],
  [[172, 16, 0, 0], 12, "private"],
  [[192, 0, 0, 0], 24, "reserved"],
  [[192, 0, 2, 0], 24, "reserved"],
  [[192, 88, 99, 0], 24, "reserved"],
  [[192, 168, 0, 0], 16, "private"],
  [[198, 18, 0, 0], 15, "reserved"],
  [[198, 51, 100, 0], 24, "reserved"],
  [[203, 0, 113, 0], 24, "reserved"],
  [[224, 0, 0, 0], 4, "multicast"],
  [[240, 0, 0, 0], 4, "reserved"],
];

function v4Category(b: number[]): AddressCategory {
  for (const [prefix, bits, category] of V4_RANGES) if (inPrefix(b, prefix, bits)) return category;
  return "public";
}

const hex = (s: string) => parseIPv6(s)!;
const V6_RANGES: [number[], number, AddressCategory][] = [
  [hex("100::"), 64, "reserved"],
  [hex("64:ff9b:1::"), 48, "private"],
  [hex("2001::"), 23, "reserved"],
  [hex("2001:db8::"), 32, "reserved"],
  [hex("fc00::"), 7, "private"],
  [hex("fe80::"), 10, "link-local"],
  [hex("fec0::"), 10, "private"],
  [hex("ff00::"), 8, "multicast"],
];

function v6Category(b: number[]): AddressCategory {
  if (b.every((x) => x === 0)) return "unspecified";
  if (b.slice(0, 15).every((x) => x === 0) && b[15] === 1) return "loopback";
  // IPv4 inside IPv6: mapped (::ffff:0:0/96), compatible (::/96), NAT64 (64:ff9b::/96), 6to4.
  if (inPrefix(b, hex("::ffff:0:0"), 96) || inPrefix(b, hex("::"), 96) || inPrefix(b, hex("64:ff9b::"), 96))
    return v4Category(b.slice(12));
  if (inPrefix(b, hex("2002::"), 16)) return v4Category(b.slice(2, 6));
  for (const [prefix, bits, category] of V6_RANGES) if (inPrefix(b, prefix, bits)) return category;
  return "public";
}

/** What kind of address this is; undefined when it is not an IP address. */
export function addressCategory(address: string): AddressCategory | undefined {
  const bare = address.replace(/^\[|\]$/g, "");
  const kind = isIP(bare.replace(/%.*$/, ""));
  if (kind === 4) return v4Category(parseIPv4(bare)!);
  if (kind === 6) {
    const b = parseIPv6(bare);
    return b ? v6Category(b) : undefined;
  }
  return undefined;
}

/** A canonical key for an address (IPv4-mapped IPv6 addresses key as their IPv4 address). */
export function addressKey(address: string): string | undefined {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const kind = isIP(bare);
  if (kind === 4) return parseIPv4(bare)!.join(".");
  if (kind === 6) {
    const b = parseIPv6(bare);
    if (!b) return undefined;
    if (inPrefix(b, hex("::ffff:0:0"), 96)) return b.slice(12).join(".");
    return b.map((x) => x.toString(16).padStart(2, "0")).join("");
  }
  return undefined;
}

export function isLoopbackName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, "");
  return h === "localhost" || h.endsWith(".localhost") || addressCategory(h) === "loopback";
}

/**
 * A `lookup` for node:http(s) and net that refuses a name when any address it resolves to has a
 * problem (`problemOf`), at connect time; `errorOf` makes the caller's error from a message.
 */
export function guardedLookup(
  resolve: Resolve,
  problemOf: (address: string) => string | undefined,
  errorOf: (message: string) => Error,
): LookupFunction {
  const allowed = async (hostname: string, family: number) => {
    const all = await resolve(hostname);
    if (all.length === 0) throw errorOf(`${hostname} does not resolve`);
    // Any refused address refuses the name: which one a connection would pick is not ours to bet on.
    for (const a of all) {
      const problem = problemOf(a.address);
      if (problem) throw errorOf(`${hostname} resolves to a refused address: ${problem}`);
    }
    const usable = family ? all.filter((a) => a.family === family) : all;
    if (usable.length === 0) throw errorOf(`${hostname} has no IPv${family} address`);
    return usable;
  };
  return (hostname, options, callback) => {
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : (options.family ?? 0);
    allowed(hostname, family).then(
      (usable) => {
        if (options.all) callback(null, usable);
        else callback(null, usable[0]!.address, usable[0]!.family);
      },
      (err: unknown) => callback((err instanceof Error ? err : errorOf(String(err))) as NodeJS.ErrnoException, "", 0),
    );
  };
}
