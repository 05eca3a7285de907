import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SESSION_MAX_AGE_SECONDS } from '@orch/protocol';

/**
 * The browser session value in the `orch_session` cookie: `<payload>.<mac>`, both base64url, where
 * payload is `{ sid, exp }` and mac is HMAC-SHA256 under a key derived from the master token. It is
 * opaque to the browser and is not the master token; every `orchd` with the same master token
 * accepts it, and changing the master token ends every session.
 */
export class SessionSigner {
  private readonly key: Buffer;

  constructor(masterToken: string) {
    this.key = createHmac('sha256', masterToken).update('orch_session v1').digest();
  }

  issue(nowMs: number = Date.now()): string {
    const payload = Buffer.from(
      JSON.stringify({
        sid: randomBytes(12).toString('base64url'),
        exp: Math.floor(nowMs / 1000) + SESSION_MAX_AGE_SECONDS,
      }),
    ).toString('base64url');
    return `${payload}.${this.mac(payload)}`;
  }

  /** Whether the value was issued by this master token and has not expired. */
  verify(value: string, nowMs: number = Date.now()): boolean {
    const [payload, mac] = value.split('.');
    if (!payload || !mac || value.split('.').length !== 2) return false;
    const expected = Buffer.from(this.mac(payload), 'base64url');
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    try {
      const { exp } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
      return typeof exp === 'number' && exp * 1000 > nowMs;
    } catch {
      return false;
    }
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }
}
