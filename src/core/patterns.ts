// User-supplied regular expressions (claim patterns, ARN patterns): always matched anchored,
// i.e. the whole value must match, never a substring.
export const MAX_PATTERN_LENGTH = 1024;

export function anchored(pattern: string): RegExp {
  return new RegExp(`^(?:${pattern})$`, "u");
}

/** Why a pattern is unusable, or undefined when it compiles. */
export function patternProblem(pattern: string): string | undefined {
  if (pattern.length > MAX_PATTERN_LENGTH) return `pattern must be at most ${MAX_PATTERN_LENGTH} characters`;
  try {
    anchored(pattern);
    return undefined;
  } catch (err) {
    return `not a valid regular expression: ${(err as Error).message}`;
  }
}

export function matchesAnchored(pattern: string, value: string): boolean {
  return anchored(pattern).test(value);
}
