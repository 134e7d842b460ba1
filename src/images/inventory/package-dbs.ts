// The package databases an image's layers hold, parsed: apk's `lib/apk/db/installed`, dpkg's
// `var/lib/dpkg/status` (and distroless's one-file-per-package `status.d/`), and os-release(5).
import { InventoryError, type InstalledPackage } from "./types.js";
import { purlOf } from "../storage/purl.js";

/**
 * The pieces of `text` between matches of `separator` (a global regex), one at a time: a
 * database of a million tiny stanzas is never a million strings at once.
 */
function* split(text: string, separator: RegExp): Generator<string> {
  separator.lastIndex = 0;
  let from = 0;
  for (let match = separator.exec(text); match; match = separator.exec(text)) {
    yield text.slice(from, match.index);
    from = match.index + match[0].length;
    if (match[0].length === 0) separator.lastIndex += 1;
  }
  yield text.slice(from);
}

/** Adds `found` to `packages`, refusing a database that lists more than `maxPackages` in all. */
function add(packages: InstalledPackage[], found: InstalledPackage, maxPackages: number): void {
  if (packages.length >= maxPackages)
    throw new InventoryError(`the package databases list more than ${maxPackages} packages (the limit)`);
  packages.push(found);
}

/**
 * The apk installed database: blocks of `K:value` lines, one per package, a blank line between.
 * Appends to `packages`, which may hold at most `maxPackages` (with what it held before).
 */
export function parseApkInstalled(
  text: string,
  distro: string,
  packages: InstalledPackage[] = [],
  maxPackages = Infinity,
): InstalledPackage[] {
  for (const block of split(text, /\r?\n\s*\r?\n/g)) {
    const fields = new Map<string, string>();
    for (const line of block.split(/\r?\n/)) {
      // Keys are one character; the first of a key (P:, V:, ...) is the one apk means.
      if (line.length >= 2 && line[1] === ":" && !fields.has(line[0]!)) fields.set(line[0]!, line.slice(2).trim());
    }
    const name = fields.get("P");
    const version = fields.get("V");
    if (!name || !version) continue;
    const arch = fields.get("A") ?? "";
    add(
      packages,
      {
        type: "apk",
        name,
        version,
        arch,
        origin: fields.get("o") || name,
        license: fields.get("L") ?? "",
        purl: purlOf("apk", distro, name, version, arch),
      },
      maxPackages,
    );
  }
  return packages;
}

/** RFC 822-like stanzas: `Field: value`, continuation lines begin with a space or a tab. */
function* stanzas(text: string): Generator<Map<string, string>> {
  for (const block of split(text, /\r?\n[ \t]*\r?\n/g)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const line of block.split(/\r?\n/)) {
      if (/^[ \t]/.test(line)) {
        if (last) fields.set(last, `${fields.get(last)}\n${line.trim()}`);
        continue;
      }
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      last = line.slice(0, colon).trim().toLowerCase();
      fields.set(last, line.slice(colon + 1).trim());
    }
    if (fields.size > 0) yield fields;
  }
}

/**
 * dpkg's status (or one file of `status.d/`): the stanzas dpkg marks `install ok installed`.
 * Distroless's status.d files carry no Status field; a stanza without one counts as installed.
 */
export function parseDpkgStatus(
  text: string,
  distro: string,
  packages: InstalledPackage[] = [],
  maxPackages = Infinity,
): InstalledPackage[] {
  for (const fields of stanzas(text)) {
    const status = fields.get("status");
    if (status !== undefined && status.split(/\s+/).join(" ") !== "install ok installed") continue;
    const name = fields.get("package");
    const version = fields.get("version");
    if (!name || !version) continue;
    const arch = fields.get("architecture") ?? "";
    // `Source: openssl (3.0.11-1)`: the source package, with its version when it differs.
    const source = (fields.get("source") ?? "").split(/\s+/)[0];
    add(
      packages,
      {
        type: "deb",
        name,
        version,
        arch,
        origin: source || name,
        license: "",
        purl: purlOf("deb", distro, name, version, arch),
      },
      maxPackages,
    );
  }
  return packages;
}

/** os-release(5): `KEY=value` lines, values optionally quoted with shell-like escapes. */
export function parseOsRelease(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!match) continue;
    let value = match[2]!.trim();
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.endsWith(quote) && value.length >= 2) {
      value = value.slice(1, -1);
      if (quote === '"') value = value.replace(/\\(["\\$`])/g, "$1");
    }
    values.set(match[1]!, value);
  }
  return values;
}
