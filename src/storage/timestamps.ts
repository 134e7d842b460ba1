// timestamptz values from PostgreSQL, parsed without a regular expression in the usual case. A
// List page parses two per row, and node-postgres's general parser (postgres-date) was a tenth of
// such a request. The fast path takes only what a UTC session prints for years 0100–9999
// ("2026-11-25 18:17:15.304123+00") and computes exactly what postgres-date computes; anything
// else (another offset, BC, infinity, other years) goes to postgres-date itself.
import pg from "pg";

const TIMESTAMPTZ_OID = 1184;
const general = pg.types.getTypeParser(TIMESTAMPTZ_OID, "text") as (text: string) => Date | number | null;

function digitsAt(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return NaN;
    n = n * 10 + d;
  }
  return n;
}

export function parseTimestamptz(text: string): Date | number | null {
  const n = text.length;
  if (
    n >= 22 &&
    text.charCodeAt(4) === 45 && // -
    text.charCodeAt(7) === 45 &&
    text.charCodeAt(10) === 32 && // space
    text.charCodeAt(13) === 58 && // :
    text.charCodeAt(16) === 58 &&
    text.charCodeAt(n - 3) === 43 && // +00
    text.charCodeAt(n - 2) === 48 &&
    text.charCodeAt(n - 1) === 48 &&
    (n === 22 || (text.charCodeAt(19) === 46 && n > 23)) // .fraction
  ) {
    const year = digitsAt(text, 0, 4);
    const month = digitsAt(text, 5, 7);
    const day = digitsAt(text, 8, 10);
    const hour = digitsAt(text, 11, 13);
    const minute = digitsAt(text, 14, 16);
    const second = digitsAt(text, 17, 19);
    const fraction = n === 22 ? 0 : digitsAt(text, 20, n - 3);
    if (year >= 100 && !Number.isNaN(month + day + hour + minute + second + fraction)) {
      // postgres-date: milliseconds = 1000 × parseFloat(".ffffff"), truncated by Date.UTC
      const ms = n === 22 ? 0 : 1000 * parseFloat(text.slice(19, n - 3));
      return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
    }
  }
  return general(text);
}

/** Type parsers for a pg pool: node-postgres's own, with timestamptz's fast path. */
export const TYPE_PARSERS = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === TIMESTAMPTZ_OID && format !== "binary") return parseTimestamptz;
    return pg.types.getTypeParser(oid, format);
  },
};
