// Secrets at rest: small values (an IdP's OIDC client secret, ...) are stored only as compact JWEs
// (alg "dir", enc "A256GCM") under a 32-byte key every replica shares (see loadSharedSecret). The
// protected header names what the value is for (`ctx`, e.g. the owning resource's uid), and that
// header is authenticated, so a ciphertext copied to another row does not decrypt there.
import { CompactEncrypt, compactDecrypt } from "jose";

export class SecretBox {
  constructor(private readonly key: Uint8Array) {
    if (key.length !== 32) throw new Error(`SecretBox needs a 32-byte key, got ${key.length} bytes`);
  }

  /** Encrypts `plaintext` for use in `context` (e.g. the owning row's uid). */
  encrypt(plaintext: string, context: string): Promise<string> {
    return new CompactEncrypt(new TextEncoder().encode(plaintext))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM", ctx: context })
      .encrypt(this.key);
  }

  /** Decrypts a value made by `encrypt` for the same context; throws otherwise. */
  async decrypt(jwe: string, context: string): Promise<string> {
    const { plaintext, protectedHeader } = await compactDecrypt(jwe, this.key, {
      keyManagementAlgorithms: ["dir"],
      contentEncryptionAlgorithms: ["A256GCM"],
    });
    if (protectedHeader.ctx !== context) throw new Error("secret was encrypted for another context");
    return new TextDecoder().decode(plaintext);
  }
}
