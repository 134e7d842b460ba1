// Durations as people type them on the hosted CLI: Go's syntax ("168h", "1h30m", "90s", "500ms",
// "1.5h"), plus days ("30d").
const MILLIS_PER_UNIT: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

/** The duration in milliseconds, or undefined when `text` is not one. */
export function durationMillis(text: string): number | undefined {
  const value = text.trim();
  let millis = 0;
  let consumed = 0;
  // "ms" before "m", so 500ms is not read as 500 minutes and a stray "s".
  for (const part of value.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ms|d|h|m|s)/g)) {
    if (part.index !== consumed) return undefined;
    consumed += part[0].length;
    millis += Number(part[1]) * MILLIS_PER_UNIT[part[2]!]!;
  }
  return value !== "" && consumed === value.length ? Math.round(millis) : undefined;
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

/**
 * A point in the past as people type it for `--since`/`--until`: a duration ago ("1h", "30m",
 * "7d") or an RFC 3339 time; undefined when `text` is neither.
 */
export function timeAgoOrAt(text: string, now = Date.now()): Date | undefined {
  const value = text.trim();
  const ago = durationMillis(value);
  if (ago !== undefined) return new Date(now - ago);
  if (!RFC3339.test(value)) return undefined;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? undefined : at;
}
