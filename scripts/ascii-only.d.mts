/** `text` with every non-ASCII character of its comments replaced, one per UTF-16 unit; throws for one outside a comment (`file` names it). */
export function asciiOnly(text: string, file: string): string;
