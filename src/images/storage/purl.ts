// Package URLs (https://github.com/package-url/purl-spec): those of the packages an image holds
// (as the inventory tables keep them), and the one parser of purls in the images module (SBOMs,
// matching, the tables' lookups). Written here rather than taken from
// packageurl-js: we build only two types (apk, deb) from fields we already hold, and read back
// only type, namespace, name, version and qualifiers; its percent-encoding rule is the one below
// (encodeURIComponent, with ':' left as is, as the spec and packageurl-js do).

/** A purl component, percent-encoded: `+` in versions becomes %2B, `:` (deb epochs) stays. */
function encodeComponent(value: string): string {
  return encodeURIComponent(value)
    .replace(/%3A/gi, ":")
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * `pkg:<type>/<distro>/<name>@<version>?arch=<arch>`: the spec's apk and deb forms (namespace =
 * the distribution, lowercased as both types require; no `arch` qualifier when it is unknown).
 */
export function purlOf(type: string, distro: string, name: string, version: string, arch: string): string {
  const namespace = distro ? `${encodeComponent(distro.toLowerCase())}/` : "";
  const lowerName = type === "apk" || type === "deb" ? name.toLowerCase() : name;
  const at = version ? `@${encodeComponent(version)}` : "";
  const qualifiers = arch ? `?arch=${encodeComponent(arch)}` : "";
  return `pkg:${type.toLowerCase()}/${namespace}${encodeComponent(lowerName)}${at}${qualifiers}`;
}

export interface ParsedPurl {
  type: string;
  namespace: string;
  name: string;
  version: string;
  qualifiers: Record<string, string>;
}

function decode(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/** The parts of a purl, or undefined when it is not one. */
export function parsePurl(purl: string): ParsedPurl | undefined {
  const match = /^pkg:\/*([A-Za-z][A-Za-z0-9.+-]*)\/([^?#]+?)(?:\?([^#]*))?(?:#.*)?$/.exec(purl.trim());
  if (!match) return undefined;
  const [, rawType, path, query] = match as unknown as [string, string, string, string | undefined];
  // The version is after the last '@' of the path (an encoded '@' in a name is %40).
  const at = path.lastIndexOf("@");
  const rawVersion = at >= 0 ? path.slice(at + 1) : "";
  const segments = (at >= 0 ? path.slice(0, at) : path).split("/").filter((s) => s !== "");
  if (segments.length === 0) return undefined;
  const parts = [...segments, rawVersion].map(decode);
  if (parts.some((p) => p === undefined)) return undefined;
  const decoded = parts as string[];
  const version = decoded.pop()!;
  const name = decoded.pop()!;
  const qualifiers: Record<string, string> = {};
  for (const pair of query ? query.split("&") : []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) continue;
    const value = decode(pair.slice(eq + 1));
    if (value !== undefined && value !== "") qualifiers[pair.slice(0, eq).toLowerCase()] = value;
  }
  return { type: rawType.toLowerCase(), namespace: decoded.join("/"), name, version, qualifiers };
}
