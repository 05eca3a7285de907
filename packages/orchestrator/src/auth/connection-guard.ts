import { OrchError } from '@orch/protocol';
import { type Logger, type LongTimer, Periodic, type Service, setLongTimeout } from '@support/server';
import type { ApiKeysRepo } from '../store/api-keys-repo.js';
import type { Principal } from './authenticator.js';
import type { BrowserSessions } from './browser-sessions.js';
import type { SessionClaims } from './session-cookie.js';

/** Why a held connection was ended: its browser session was logged out or expired, or its API key revoked. */
export type EndReason = 'logged_out' | 'expired' | 'key_revoked';

const ENDINGS: Readonly<Record<EndReason, { readonly message: string; readonly close: string }>> = {
  logged_out: {
    message: 'the browser session of this connection was logged out: log in again',
    close: 'session ended: logged out',
  },
  expired: {
    message: 'the browser session of this connection has expired: log in again',
    close: 'session ended: expired',
  },
  key_revoked: { message: 'the API key of this connection was revoked', close: 'API key revoked' },
};

/**
 * The WebSocket close code of a connection whose credential ended: 1008, "policy violation" (RFC
 * 6455, 7.4.1), the code for "this endpoint will no longer serve you"; the close reason says why.
 */
export const WS_CREDENTIAL_ENDED = 1008;

/**
 * What a held connection's signal aborts with: `401 unauthorized` (as the next request with that
 * credential would get), `details.reason` saying which ending, and a short WebSocket close reason.
 */
export class CredentialEnded extends OrchError {
  override readonly name = 'CredentialEnded';

  constructor(readonly reason: EndReason) {
    super('unauthorized', ENDINGS[reason].message, { reason }, 401, {
      'WWW-Authenticate': 'Bearer realm="orchd", error="invalid_token"',
    });
  }

  /** The close reason of a WebSocket (a few words; the protocol allows at most 123 bytes). */
  get closeReason(): string {
    return ENDINGS[this.reason].close;
  }
}

/** A connection held by the guard. */
export interface Hold {
  /** Aborts, with a {@link CredentialEnded}, when the credential that opened the connection ends. */
  readonly signal: AbortSignal;
  /** Stops watching (the connection closed for another reason); idempotent. */
  release(): void;
}

/**
 * `work`, unless `signal` (a {@link Hold}'s) aborts first: then rejects with its reason, and what
 * `work` settles to later is dropped. For an answer that comes in one piece at the end (exec).
 */
export function unlessEnded<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const ended = () => {
      work.catch(() => undefined);
      reject(signal.reason);
    };
    signal.addEventListener('abort', ended, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', ended));
  });
}

/** Where credentials are checked again: the store, through the session list and the key repository. */
export interface CredentialStores {
  /** Absent without a master token: then no connection is opened by a session. */
  readonly sessions?: Pick<BrowserSessions, 'revokedAmong'>;
  /** Absent without a key store: then no connection is opened by an API key. */
  readonly apiKeys?: Pick<ApiKeysRepo, 'liveAmong'>;
}

interface Held {
  readonly ctl: AbortController;
  readonly session: SessionClaims | undefined;
  readonly keyId: string | undefined;
  expiry: LongTimer | undefined;
}

/**
 * Ends long-lived connections (the console WebSocket, `GET /v1/events`, a log follow) when the
 * credential that opened them ends, instead of letting them outlive it. A request is
 * authenticated once; a connection that stays open is {@link ConnectionGuard.hold held} here with
 * its principal, and its `signal` aborts when:
 *
 * ```
 *   hold(principal) ──▶ held ──release() (closed for another reason)──▶ released
 *                        │
 *                        ├─ logout on this orchd (sessionEnded) ─────────────┐
 *                        ├─ the store says the session is revoked (a round) ─┤
 *                        ├─ the session's exp passes (timer, or a round) ────┼─▶ ended: signal aborts
 *                        ├─ key revoked on this orchd (apiKeyRevoked) ───────┤   with CredentialEnded
 *                        └─ the store says the key is not live (a round) ────┘
 * ```
 *
 * A logout or key revocation on this `orchd` ends its connections at once. One made on another
 * `orchd` sharing the store is found by a round, every `intervalMs` (`ORCH_STREAM_RECHECK_SEC`):
 * ONE query for all distinct sessions held and one for all distinct keys held (none when nothing
 * of that kind is held), however many connections share them. A round the store cannot answer
 * ends nothing (the connection is not at fault): it is logged as a warning, with counts only
 * (never a session id, key or token), and the next round tries again. The master token and
 * pass-through connections are not held: nothing can end those credentials while `orchd` runs.
 */
export class ConnectionGuard implements Service {
  readonly name = 'connection guard';
  readonly #stores: CredentialStores;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #periodic: Periodic;
  /** Held connections by session id, with the session's claims. */
  readonly #bySession = new Map<string, { readonly claims: SessionClaims; readonly held: Set<Held> }>();
  /** Held connections by API key id. */
  readonly #byKey = new Map<string, Set<Held>>();

  constructor(stores: CredentialStores, intervalMs: number, logger: Logger, now: () => number = Date.now) {
    this.#stores = stores;
    this.#logger = logger;
    this.#now = now;
    this.#periodic = new Periodic({
      name: this.name,
      intervalMs,
      log: logger,
      delayFirst: true,
      tick: () => this.check(),
    });
  }

  /** Re-checks the held credentials every interval until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return this.#periodic.run(signal);
  }

  /**
   * Holds a connection opened by `principal` until it is released or its credential ends. A
   * principal that cannot end (master token, pass-through) gets a signal that never aborts.
   * @example
   * const hold = guard.hold(principal);
   * hold.signal.addEventListener('abort', () => ws.close(WS_CREDENTIAL_ENDED, hold.signal.reason.closeReason));
   * ws.on('close', () => hold.release());
   */
  hold(principal: Principal | undefined): Hold {
    const ctl = new AbortController();
    const session = principal?.kind === 'master' ? principal.session : undefined;
    const keyId = principal?.kind === 'api_key' ? principal.id : undefined;
    if (session === undefined && keyId === undefined) return { signal: ctl.signal, release: () => undefined };
    const held: Held = { ctl, session, keyId, expiry: undefined };
    if (session) {
      const entry = this.#bySession.get(session.sid) ?? { claims: session, held: new Set<Held>() };
      entry.held.add(held);
      this.#bySession.set(session.sid, entry);
      held.expiry = setLongTimeout(
        () => this.#end(held, 'expired'),
        session.exp * 1000 - this.#now(),
        this.#now,
      ).unref();
    } else if (keyId !== undefined) {
      const set = this.#byKey.get(keyId) ?? new Set<Held>();
      set.add(held);
      this.#byKey.set(keyId, set);
    }
    return { signal: ctl.signal, release: () => this.#forget(held) };
  }

  /** Ends, at once, every connection of session `sid` (it was logged out on this orchd). */
  sessionEnded(sid: string): void {
    for (const held of [...(this.#bySession.get(sid)?.held ?? [])]) this.#end(held, 'logged_out');
  }

  /** Ends, at once, every connection of API key `id` (it was revoked on this orchd). */
  apiKeyRevoked(id: string): void {
    for (const held of [...(this.#byKey.get(id) ?? [])]) this.#end(held, 'key_revoked');
  }

  /** How many connections are held (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const { held } of this.#bySession.values()) n += held.size;
    for (const set of this.#byKey.values()) n += set.size;
    return n;
  }

  /** One round: the held sessions and keys against the store (a query per kind, when any is held). */
  async check(): Promise<void> {
    await Promise.all([this.#checkSessions(), this.#checkKeys()]);
  }

  async #checkSessions(): Promise<void> {
    const now = this.#now();
    // A clock that jumped past an expiry (the timers count monotonic time) is caught here.
    for (const { claims, held } of [...this.#bySession.values()]) {
      if (claims.exp * 1000 <= now) for (const h of [...held]) this.#end(h, 'expired');
    }
    const { sessions } = this.#stores;
    if (!sessions || this.#bySession.size === 0) return;
    const open = [...this.#bySession.values()].map((e) => e.claims);
    let revoked: Set<string>;
    try {
      revoked = await sessions.revokedAmong(open);
    } catch (err) {
      this.#warn(err, { sessions: open.length });
      return;
    }
    for (const sid of revoked) this.sessionEnded(sid);
  }

  async #checkKeys(): Promise<void> {
    const { apiKeys } = this.#stores;
    if (!apiKeys || this.#byKey.size === 0) return;
    const open = [...this.#byKey.keys()];
    let live: Set<string>;
    try {
      live = await apiKeys.liveAmong(open);
    } catch (err) {
      this.#warn(err, { api_keys: open.length });
      return;
    }
    for (const id of open) if (!live.has(id)) this.apiKeyRevoked(id);
  }

  #warn(err: unknown, counts: Record<string, number>): void {
    // Only the error's text and counts: the ids held here are never logged.
    this.#logger.warn(
      { err: err instanceof Error ? err.message : String(err), ...counts },
      'could not re-check the credentials of open connections against the store; they stay open until the next round',
    );
  }

  #end(held: Held, reason: EndReason): void {
    if (!this.#forget(held)) return;
    held.ctl.abort(new CredentialEnded(reason));
  }

  /** Drops `held` from the indexes; false when it was no longer held. */
  #forget(held: Held): boolean {
    held.expiry?.clear();
    if (held.session) {
      const entry = this.#bySession.get(held.session.sid);
      if (!entry?.held.delete(held)) return false;
      if (entry.held.size === 0) this.#bySession.delete(held.session.sid);
      return true;
    }
    if (held.keyId !== undefined) {
      const set = this.#byKey.get(held.keyId);
      if (!set?.delete(held)) return false;
      if (set.size === 0) this.#byKey.delete(held.keyId);
      return true;
    }
    return false;
  }
}
