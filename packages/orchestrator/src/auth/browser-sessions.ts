import type { RevokedSessionsRepo } from '../store/revoked-sessions-repo.js';
import type { SessionClaims, SessionSigner } from './session-cookie.js';

/** Where revoked sessions are recorded: the store (`RevokedSessionsRepo`), shared by every `orchd`. */
export type RevocationList = Pick<RevokedSessionsRepo, 'revoke' | 'isRevoked' | 'revokedAmong'>;

/** Revoked session ids remembered in memory at most (the oldest is forgotten first). */
export const REVOKED_CACHE_SIZE = 10_000;

/**
 * The browser sessions of `POST /login` and `POST /logout`: signed cookie values
 * ({@link SessionSigner}) that logout revokes server-side, so that a copied value is refused by
 * every `orchd` on the store, and by one started later, until it would have expired anyway.
 *
 * Caching: a revoked id never becomes valid again, so ids found revoked (or revoked here) are
 * remembered in memory, up to {@link REVOKED_CACHE_SIZE} and until they expire; a request with one
 * does not reach the store. "Not revoked" is never cached: another `orchd` may revoke the session
 * at any moment, and a cached "no" would keep it alive here for as long as it was cached. So each
 * cookie-authenticated request of a live session costs one primary-key read, as each API-key
 * request does (bearer requests never pay it). A store outage makes a cookie request fail as
 * `503 unavailable` rather than admit a session that may have been revoked.
 *
 * Connections that outlive their request (console, event stream, log follow) are not re-checked
 * here: `ConnectionGuard` holds them and asks {@link BrowserSessions.revokedAmong} about all their
 * sessions at once.
 */
export class BrowserSessions {
  readonly #signer: SessionSigner;
  readonly #revoked: RevocationList;
  readonly #now: () => number;
  /** Revoked session ids and their expiry (ms), oldest first. */
  readonly #known = new Map<string, number>();

  constructor(signer: SessionSigner, revoked: RevocationList, now: () => number = Date.now) {
    this.#signer = signer;
    this.#revoked = revoked;
    this.#now = now;
  }

  /** A fresh session value for the `orch_session` cookie. */
  issue(): string {
    return this.#signer.issue(this.#now());
  }

  /**
   * The claims of `value` when it is a session this master token issued that has neither expired
   * nor been revoked (one store read, see the class comment), else undefined.
   */
  async live(value: string): Promise<SessionClaims | undefined> {
    const claims = this.#signer.open(value, this.#now());
    if (!claims) return undefined;
    if (this.#known.has(claims.sid)) return undefined;
    if (!(await this.#revoked.isRevoked(claims.sid))) return claims;
    this.#remember(claims);
    return undefined;
  }

  /**
   * Ends the session `value` everywhere: records its id as revoked in the store, and answers the
   * claims of the session it ended. A value that is not a live session (garbage, another master
   * token's, expired) has nothing to end: undefined.
   */
  async end(value: string): Promise<SessionClaims | undefined> {
    const claims = this.#signer.open(value, this.#now());
    if (!claims) return undefined;
    if (!this.#known.has(claims.sid)) await this.#revoked.revoke(claims.sid, new Date(claims.exp * 1000));
    this.#remember(claims);
    return claims;
  }

  /**
   * The ids of `sessions` that have been revoked: those remembered here, plus one store query for
   * all the others together (none when every one is remembered). Found ones are remembered.
   * Rejects when the store cannot answer.
   */
  async revokedAmong(sessions: readonly SessionClaims[]): Promise<Set<string>> {
    const revoked = new Set(sessions.filter((s) => this.#known.has(s.sid)).map((s) => s.sid));
    const unknown = sessions.filter((s) => !revoked.has(s.sid));
    if (unknown.length === 0) return revoked;
    const found = await this.#revoked.revokedAmong(unknown.map((s) => s.sid));
    for (const s of unknown) {
      if (!found.has(s.sid)) continue;
      revoked.add(s.sid);
      this.#remember(s);
    }
    return revoked;
  }

  #remember({ sid, exp }: SessionClaims): void {
    const now = this.#now();
    for (const [known, expMs] of this.#known) if (expMs <= now) this.#known.delete(known);
    this.#known.delete(sid);
    this.#known.set(sid, exp * 1000);
    for (const oldest of this.#known.keys()) {
      if (this.#known.size <= REVOKED_CACHE_SIZE) break;
      this.#known.delete(oldest);
    }
  }
}
