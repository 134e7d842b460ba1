// The serve bundle made ASCII (scripts/bundle.mjs): a module of its own so that its rule is tested
// (test/unit/ascii-only.test.ts) without running a build.

/**
 * The serve bundle's text made ASCII, so that the launcher reads it as a one-byte string
 * (Latin-1): a single non-ASCII character makes V8 hold all ~6 MB of it as UTF-16, twice the
 * memory, and decoding it as UTF-8 took ~60 ms of each start. esbuild escapes non-ASCII characters
 * in code (`charset: "ascii"`, its default) but keeps them in comments (ours have dashes and
 * arrows; a licence notice names Jimmy W\u00e4rting), so those are replaced there, one ASCII
 * character per UTF-16 unit: columns, and so the source map, hold. A non-ASCII character anywhere
 * but a comment throws (`file` names it), which stops the build.
 */
export function asciiOnly(text, file) {
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const at = lines[i].search(/[^\x00-\x7f]/);
    if (at < 0) continue;
    const before = lines[i].slice(0, at);
    const inComment = /^\s*(\*|\/\*|\/\/|\(\*!)/.test(lines[i]) || /\/\/|\/\*/.test(before);
    if (!inComment)
      throw new Error(`${file}:${i + 1}: a non-ASCII character outside a comment: ${lines[i].trim().slice(0, 200)}`);
    lines[i] = lines[i].replace(/[^\x00-\x7f]/g, asciiOf);
  }
  return lines.join("\n");
}

/** A letter without its accent ("\u00e4" -> "a"), anything else "?". */
function asciiOf(unit) {
  const letter = unit.normalize("NFD").replace(/[\u0300-\u036f]/g, "");
  return /^[\x20-\x7e]$/.test(letter) ? letter : "?";
}
