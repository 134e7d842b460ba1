// What an event may hold is what the database can store and a receiver can use: text without NUL
// or unpaired surrogates (PostgreSQL's text and jsonb refuse them), each string bounded. Events
// carry what callers sent (a token's unverified `sub`, a pull's reference, a user agent), so a
// refusal or a failed pull is recorded with those made storable instead of failing the request.
const MAX_STRING = 2048;
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `text` with NUL and unpaired surrogates replaced by U+FFFD, at most MAX_STRING characters. */
export function storableText(text: string): string {
  const clean = text.replace(UNSTORABLE, "\uFFFD");
  return clean.length > MAX_STRING ? `${clean.slice(0, MAX_STRING - 1)}…` : clean;
}

/** A JSON value with every string (keys included) made storable. */
export function storableJson(value: unknown): unknown {
  if (typeof value === "string") return storableText(value);
  if (Array.isArray(value)) return value.map(storableJson);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) out[storableText(key)] = storableJson(inner);
    return out;
  }
  return value;
}
