import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { TRANSFER_GRANT, TRANSFER_GRANT_MAX_SECONDS, transferGrantMessage } from '@orch/protocol';

/**
 * Bearer-token check in constant time: both sides are hashed to 32 bytes first, so neither the
 * content nor the length of the token leaks through timing.
 */
export class BearerAuth {
  private readonly expected: Buffer;
  constructor(private readonly token: string) {
    this.expected = createHash('sha256').update(token).digest();
  }

  /**
   * True when `grant` is a transfer grant for snapshot `snapshotId` made under this agent's token
   * that has not expired (and expires no further ahead than a grant may): see `TRANSFER_GRANT_HEADER`
   * of @orch/protocol. The MAC is compared in constant time.
   */
  allowsGrant(
    grant: string | undefined,
    snapshotId: string,
    nowSeconds = Math.floor(Date.now() / 1000),
  ): boolean {
    const m = TRANSFER_GRANT.exec(grant ?? '');
    if (!m) return false;
    const expires = Number(m[1]);
    if (expires < nowSeconds || expires > nowSeconds + TRANSFER_GRANT_MAX_SECONDS) return false;
    const want = createHmac('sha256', this.token).update(transferGrantMessage(snapshotId, expires)).digest();
    return timingSafeEqual(Buffer.from(m[2]!, 'hex'), want);
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
