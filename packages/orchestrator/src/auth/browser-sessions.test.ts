import { describe, expect, test } from 'vitest';
import { BrowserSessions, type RevocationList } from './browser-sessions.js';
import { SessionSigner } from './session-cookie.js';

/** The store's revocation list as another orchd sees it too: one Map, with its reads counted. */
class SharedList implements RevocationList {
  readonly rows = new Map<string, Date>();
  reads = 0;
  async revoke(sid: string, expiresAt: Date): Promise<void> {
    this.rows.set(sid, expiresAt);
  }
  async isRevoked(sid: string): Promise<boolean> {
    this.reads++;
    return this.rows.has(sid);
  }
  async revokedAmong(sids: readonly string[]): Promise<Set<string>> {
    this.reads++;
    return new Set(sids.filter((sid) => this.rows.has(sid)));
  }
}

const DAY = 24 * 3600 * 1000;

describe('BrowserSessions', () => {
  test('logout revokes a session on every instance sharing the list, and one started later', async () => {
    const list = new SharedList();
    const signer = new SessionSigner('master');
    const a = new BrowserSessions(signer, list);
    const b = new BrowserSessions(signer, list);
    const value = a.issue();
    expect(await a.live(value)).toBeDefined();
    expect(await b.live(value)).toBeDefined();
    expect(await b.end(value)).toEqual(signer.open(value));
    expect(await b.live(value)).toBeUndefined();
    // `a` had seen the session valid a moment ago: that was not cached.
    expect(await a.live(value)).toBeUndefined();
    expect(await new BrowserSessions(signer, list).live(value)).toBeUndefined();
    // The session's id is revoked until the session's own expiry.
    const claims = signer.open(value)!;
    expect([...list.rows]).toEqual([[claims.sid, new Date(claims.exp * 1000)]]);
  });

  test('"revoked" is remembered (no more store reads); "not revoked" is read from the store every time', async () => {
    const list = new SharedList();
    const sessions = new BrowserSessions(new SessionSigner('master'), list);
    const live = sessions.issue();
    const ended = sessions.issue();
    await sessions.live(live);
    await sessions.live(live);
    expect(list.reads).toBe(2);
    await sessions.end(ended);
    const reads = list.reads;
    expect(await sessions.live(ended)).toBeUndefined();
    expect(await sessions.live(ended)).toBeUndefined();
    expect(list.reads).toBe(reads);
  });

  test('a revocation found in the store (made elsewhere) is remembered too', async () => {
    const list = new SharedList();
    const signer = new SessionSigner('master');
    const here = new BrowserSessions(signer, list);
    const value = here.issue();
    await new BrowserSessions(signer, list).end(value);
    expect(await here.live(value)).toBeUndefined();
    const reads = list.reads;
    expect(await here.live(value)).toBeUndefined();
    expect(list.reads).toBe(reads);
  });

  test('revokedAmong: one store read for all sessions not known revoked; those found are remembered', async () => {
    const list = new SharedList();
    const signer = new SessionSigner('master');
    const here = new BrowserSessions(signer, list);
    const [a, b, c] = [here.issue(), here.issue(), here.issue()];
    const claims = [a, b, c].map((v) => signer.open(v)!);
    await here.end(a);
    await new BrowserSessions(signer, list).end(b);
    const reads = list.reads;
    expect(await here.revokedAmong(claims)).toEqual(new Set([claims[0]!.sid, claims[1]!.sid]));
    expect(list.reads).toBe(reads + 1);
    expect(await here.live(b)).toBeUndefined();
    expect(list.reads).toBe(reads + 1);
    expect(await here.revokedAmong(claims.slice(0, 2))).toEqual(new Set([claims[0]!.sid, claims[1]!.sid]));
    expect(list.reads).toBe(reads + 1);
  });

  test('values that are no live session have nothing to end and never reach the store', async () => {
    const list = new SharedList();
    const clock = { now: Date.now() };
    const sessions = new BrowserSessions(new SessionSigner('master'), list, () => clock.now);
    const expired = new SessionSigner('master').issue(clock.now - 8 * DAY);
    const foreign = new SessionSigner('another master').issue(clock.now);
    for (const value of ['', 'garbage', 'a.b', expired, foreign]) {
      expect(await sessions.end(value), value).toBeUndefined();
      expect(await sessions.live(value), value).toBeUndefined();
    }
    expect(list.rows.size).toBe(0);
    expect(list.reads).toBe(0);
  });

  test('a session expires by the clock it was given', async () => {
    const list = new SharedList();
    const clock = { now: 1_000_000_000 };
    const sessions = new BrowserSessions(new SessionSigner('master'), list, () => clock.now);
    const value = sessions.issue();
    clock.now += 7 * DAY - 1000;
    expect(await sessions.live(value)).toBeDefined();
    clock.now += 1000;
    expect(await sessions.live(value)).toBeUndefined();
  });
});
