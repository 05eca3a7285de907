import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Bearer-token check in constant time: both sides are hashed to 32 bytes first, so neither the
 * content nor the length of the token leaks through timing.
 */
export class BearerAuth {
  private readonly expected: Buffer;
  constructor(token: string) {
    this.expected = createHash('sha256').update(token).digest();
  }

  /** True when `authorization` is `Bearer <the token>`. */
  allows(authorization: string | undefined): boolean {
    const m = /^Bearer (.+)$/i.exec(authorization ?? '');
    const given = createHash('sha256')
      .update(m?.[1] ?? '')
      .digest();
    return timingSafeEqual(given, this.expected) && !!m;
  }
}
