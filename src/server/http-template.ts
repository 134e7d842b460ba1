// google.api.http path templates (https://google.aip.dev/127):
//   Template = "/" Segments [ ":" Verb ] ; Segment = "*" | "**" | LITERAL | Variable ;
//   Variable = "{" FieldPath [ "=" Segments ] "}"
// compiled to an anchored RegExp whose capture groups are the variables.

export interface CompiledTemplate {
  source: string;
  regex: RegExp;
  /** field paths (proto names, dot-separated) of the variables, in capture order */
  variables: string[];
  /** for ordering: literal characters, wildcard count, whether a custom verb is present */
  literalLength: number;
  wildcards: number;
  hasVerb: boolean;
  /**
   * The path's leading segments that are plain literals, as a matching path has them verbatim
   * (a literal segment carrying the custom verb is not among them): for indexing routes.
   */
  leadingLiterals: string[];
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

export function compileTemplate(template: string): CompiledTemplate {
  if (!template.startsWith("/")) throw new Error(`http template must start with "/": ${template}`);
  let path = template;
  let verb = "";
  // The verb is the text after the last ":" that is outside any {...}.
  let depth = 0;
  for (let i = 0; i < template.length; i++) {
    const c = template[i];
    if (c === "{") depth++;
    else if (c === "}") depth--;
    else if (c === ":" && depth === 0) {
      path = template.slice(0, i);
      verb = template.slice(i + 1);
      break;
    }
  }
  const variables: string[] = [];
  let literalLength = verb.length;
  let wildcards = 0;
  let pattern = "";
  // Split on "/" outside braces.
  const segments: string[] = [];
  let current = "";
  depth = 0;
  for (const c of path.slice(1)) {
    if (c === "{") depth++;
    if (c === "}") depth--;
    if (c === "/" && depth === 0) {
      segments.push(current);
      current = "";
    } else current += c;
  }
  segments.push(current);

  const segmentPattern = (seg: string): string => {
    if (seg === "*") {
      wildcards++;
      return "[^/]+";
    }
    if (seg === "**") {
      wildcards += 100;
      return ".*";
    }
    literalLength += seg.length;
    return escapeRegex(seg);
  };

  segments.forEach((seg, index) => {
    const variable = /^\{([a-zA-Z0-9_.]+)(?:=(.+))?\}$/.exec(seg);
    if (!variable) {
      pattern += "/" + segmentPattern(seg);
      return;
    }
    variables.push(variable[1]!);
    const inner = (variable[2] ?? "*").split("/");
    const innerPattern = inner.map(segmentPattern).join("/");
    if (inner.length === 1 && inner[0] === "**" && index === segments.length - 1) {
      // A trailing {x=**} may be empty, with or without its slash: POST /groups creates a root.
      pattern += "(?:/(.*))?";
    } else {
      pattern += "/(" + innerPattern + ")";
    }
  });
  if (verb) pattern += ":" + escapeRegex(verb);
  const leadingLiterals: string[] = [];
  for (const [index, seg] of segments.entries()) {
    if (seg.startsWith("{") || seg === "*" || seg === "**" || (verb && index === segments.length - 1)) break;
    leadingLiterals.push(seg);
  }
  return {
    leadingLiterals,
    source: template,
    regex: new RegExp("^" + pattern + "$"),
    variables,
    literalLength,
    wildcards,
    hasVerb: verb !== "",
  };
}

/** More specific templates first: custom verbs, then fewer `**`, then more literal text, then fewer `*`. */
export function compareSpecificity(a: CompiledTemplate, b: CompiledTemplate): number {
  if (a.hasVerb !== b.hasVerb) return a.hasVerb ? -1 : 1;
  // Fewer `**` first; among equals, more literal text before fewer `*`: a `**` route with a
  // literal tail (`/repos/{repo_uid=**}/digests/{digest}/size`) is tried before the bare
  // `/repos/{uid=**}`, which would match its paths too.
  const multi = Math.floor(a.wildcards / 100) - Math.floor(b.wildcards / 100);
  if (multi !== 0) return multi;
  if (a.literalLength !== b.literalLength) return b.literalLength - a.literalLength;
  return a.wildcards - b.wildcards;
}
