import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/**
 * Encrypts secrets at rest (agent tokens, per-VM secrets) with AES-256-GCM under
 * `TOKEN_ENCRYPTION_KEY`. Sealed form: `v1.<iv>.<ciphertext+tag>` in base64url; a fresh 96-bit IV
 * each time, and the tag makes tampering or a wrong key fail loudly instead of decrypting garbage.
 *
 * @example
 * const box = new TokenBox(key);
 * box.open(box.seal('agent-token')) // 'agent-token'
 */
export class TokenBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('token encryption key must be 32 bytes');
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${VERSION}.${iv.toString('base64url')}.${body.toString('base64url')}`;
  }

  /** Decrypts a sealed value; throws if it was sealed under another key or altered. */
  open(sealed: string): string {
    const [version, iv, body] = sealed.split('.');
    if (version !== VERSION || !iv || !body) throw new Error('not a sealed value');
    const data = Buffer.from(body, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(data.subarray(data.length - 16));
    return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]).toString(
      'utf8',
    );
  }
}
