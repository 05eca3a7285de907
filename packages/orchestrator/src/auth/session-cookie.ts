import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SESSION_MAX_AGE_SECONDS } from '@orch/protocol';

/** What a session value says once its MAC checks out: its random id and when it expires. */
export interface SessionClaims {
  /** Random session id (12 bytes, base64url); not a secret on its own, the MAC is what counts. */
  readonly sid: string;
  /** Expiry, in seconds since the epoch. */
  readonly exp: number;
}

/**
 * The browser session value in the `orch_session` cookie: `<payload>.<mac>`, both base64url, where
 * payload is `{ sid, exp }` and mac is HMAC-SHA256 under a key derived from the master token. It is
 * opaque to the browser and is not the master token; every `orchd` with the same master token
 * accepts it until it expires or is logged out (revocation is `BrowserSessions`' part), and
 * changing the master token ends every session.
 */
export class SessionSigner {
  private readonly key: Buffer;

  constructor(masterToken: string) {
    this.key = createHmac('sha256', masterToken).update('orch_session v1').digest();
  }

  /** A fresh session value: a new random `sid`, expiring {@link SESSION_MAX_AGE_SECONDS} from `nowMs`. */
  issue(nowMs: number = Date.now()): string {
    const payload = Buffer.from(
      JSON.stringify({
        sid: randomBytes(12).toString('base64url'),
        exp: Math.floor(nowMs / 1000) + SESSION_MAX_AGE_SECONDS,
      }),
    ).toString('base64url');
    return `${payload}.${this.mac(payload)}`;
  }

  /** Whether the value was issued by this master token and has not expired (revocation aside). */
  verify(value: string, nowMs: number = Date.now()): boolean {
    return this.open(value, nowMs) !== undefined;
  }

  /**
   * The claims of a value issued by this master token that has not expired, else undefined (a
   * wrong MAC, another master token, a malformed payload, or past `exp`). Says nothing about
   * revocation: see `BrowserSessions`.
   */
  open(value: string, nowMs: number = Date.now()): SessionClaims | undefined {
    const parts = value.split('.');
    const [payload, mac] = parts;
    if (!payload || !mac || parts.length !== 2) return undefined;
    const expected = Buffer.from(this.mac(payload), 'base64url');
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const { sid, exp } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as {
        sid?: unknown;
        exp?: unknown;
      };
      if (typeof sid !== 'string' || sid === '' || typeof exp !== 'number' || !Number.isFinite(exp))
        return undefined;
      return exp * 1000 > nowMs ? { sid, exp } : undefined;
    } catch {
      return undefined;
    }
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }
}
