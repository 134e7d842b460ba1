// No secret ever appears in an event: an RPC's response is recorded as its body with every field
// that holds one removed — invite codes, tokens, client secrets, passwords, private keys —
// wherever it sits in the message (JSON names, at any depth).
const SECRET_NAMES =
  /^(code|token|secret|password|privateKey|clientSecret|scimToken|refreshToken|accessToken|idToken)$/i;
const SECRET_PARTS = /secret|password|private_?key|Token$/i;

export function isSecretField(jsonName: string): boolean {
  return SECRET_NAMES.test(jsonName) || SECRET_PARTS.test(jsonName);
}

/** A copy of a JSON value without its secret fields. */
export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) if (!isSecretField(key)) out[key] = redactSecrets(inner);
    return out;
  }
  return value;
}
