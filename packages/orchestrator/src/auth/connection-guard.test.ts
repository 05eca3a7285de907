import pino from 'pino';
import { afterEach, describe, expect, test, vi } from 'vitest';
import type { Principal } from './authenticator.js';
import {
  ConnectionGuard,
  type CredentialEnded,
  type CredentialStores,
  unlessEnded,
} from './connection-guard.js';
import type { SessionClaims } from './session-cookie.js';

/** The store as the guard sees it: revoked session ids and live key ids, queries counted, outages on demand. */
class Store implements Required<CredentialStores> {
  readonly revoked = new Set<string>();
  readonly liveKeys = new Set<string>();
  queries: string[][] = [];
  down = false;
  readonly sessions = {
    revokedAmong: async (sessions: readonly SessionClaims[]) => {
      this.queries.push(sessions.map((s) => s.sid));
      if (this.down) throw new Error('connect ECONNREFUSED /tmp/pg/.s.PGSQL.5432');
      return new Set(sessions.filter((s) => this.revoked.has(s.sid)).map((s) => s.sid));
    },
  };
  readonly apiKeys = {
    liveAmong: async (ids: readonly string[]) => {
      this.queries.push([...ids]);
      if (this.down) throw new Error('connect ECONNREFUSED /tmp/pg/.s.PGSQL.5432');
      return new Set(ids.filter((id) => this.liveKeys.has(id)));
    },
  };
}

function setup() {
  const store = new Store();
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
  const guard = new ConnectionGuard(store, 1000, logger);
  return { store, lines, guard };
}

const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;
const session = (sid: string, exp = inAnHour()): Principal => ({ kind: 'master', session: { sid, exp } });
const key = (id: string): Principal => ({ kind: 'api_key', id });
const reasonOf = (signal: AbortSignal) => (signal.reason as CredentialEnded).reason;

afterEach(() => {
  vi.useRealTimers();
});

describe('ConnectionGuard', () => {
  test('a logout here ends at once every connection of that session, and only those', () => {
    const { guard } = setup();
    const [a1, a2, b] = [guard.hold(session('a')), guard.hold(session('a')), guard.hold(session('b'))];
    guard.sessionEnded('a');
    expect([a1.signal.aborted, a2.signal.aborted, b.signal.aborted]).toEqual([true, true, false]);
    expect(reasonOf(a1.signal)).toBe('logged_out');
    const ended = a1.signal.reason as CredentialEnded;
    expect(ended.status).toBe(401);
    expect(ended.toBody()).toEqual({
      error: {
        code: 'unauthorized',
        message: 'the browser session of this connection was logged out: log in again',
        details: { reason: 'logged_out' },
      },
    });
    expect(ended.closeReason).toBe('session ended: logged out');
    expect(guard.size).toBe(1);
  });

  test('a round asks the store once per kind for all distinct credentials held, and ends the revoked ones', async () => {
    const { store, guard } = setup();
    store.liveKeys.add('key_live');
    const holds = [
      ...Array.from({ length: 5 }, () => guard.hold(session('s1'))),
      ...Array.from({ length: 5 }, () => guard.hold(session('s2'))),
      guard.hold(key('key_live')),
      guard.hold(key('key_gone')),
      guard.hold(key('key_gone')),
    ];
    store.revoked.add('s2');
    await guard.check();
    expect(store.queries.map((q) => [...q].sort())).toEqual([
      ['s1', 's2'],
      ['key_gone', 'key_live'],
    ]);
    expect(holds.map((h) => h.signal.aborted)).toEqual([
      ...Array(5).fill(false),
      ...Array(5).fill(true),
      false,
      true,
      true,
    ]);
    expect(reasonOf(holds[5]!.signal)).toBe('logged_out');
    expect(reasonOf(holds[11]!.signal)).toBe('key_revoked');
    // Ended connections are not asked about again.
    store.queries = [];
    await guard.check();
    expect(store.queries).toEqual([['s1'], ['key_live']]);
  });

  test('a store that cannot answer ends nothing and is logged without ids; the next round catches up', async () => {
    const { store, lines, guard } = setup();
    const held = guard.hold(session('secret-session-id'));
    store.revoked.add('secret-session-id');
    store.down = true;
    await expect(guard.check()).resolves.toBeUndefined();
    expect(held.signal.aborted).toBe(false);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 40,
      sessions: 1,
      err: 'connect ECONNREFUSED /tmp/pg/.s.PGSQL.5432',
    });
    expect(lines[0]).not.toContain('secret-session-id');
    store.down = false;
    await guard.check();
    expect(reasonOf(held.signal)).toBe('logged_out');
  });

  test("a session's connections end when it expires", async () => {
    vi.useFakeTimers({ now: 1_000_000_000_000 });
    const { guard } = setup();
    const soon = guard.hold(session('soon', 1_000_000_000 + 60));
    const later = guard.hold(session('later', 1_000_000_000 + 3600));
    vi.advanceTimersByTime(59_999);
    expect(soon.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(reasonOf(soon.signal)).toBe('expired');
    expect(later.signal.aborted).toBe(false);
    expect(guard.size).toBe(1);
  });

  test('the master token and pass-through are not held; a released connection is forgotten', async () => {
    const { store, guard } = setup();
    const master = guard.hold({ kind: 'master' });
    const anonymous = guard.hold({ kind: 'anonymous' });
    expect(guard.size).toBe(0);
    const held = guard.hold(session('s'));
    held.release();
    held.release();
    expect(guard.size).toBe(0);
    store.revoked.add('s');
    await guard.check();
    guard.sessionEnded('s');
    expect(store.queries).toEqual([]);
    expect([master.signal.aborted, anonymous.signal.aborted, held.signal.aborted]).toEqual([
      false,
      false,
      false,
    ]);
  });

  test('a key revoked here ends its connections at once', () => {
    const { guard } = setup();
    const [k, other] = [guard.hold(key('key_a')), guard.hold(key('key_b'))];
    guard.apiKeyRevoked('key_a');
    expect(reasonOf(k.signal)).toBe('key_revoked');
    expect(other.signal.aborted).toBe(false);
  });

  test('unlessEnded answers the work, or the ending when it comes first', async () => {
    const { guard } = setup();
    const done = guard.hold(session('done'));
    expect(await unlessEnded(Promise.resolve('output'), done.signal)).toBe('output');
    const cut = guard.hold(session('cut'));
    const work: { resolve?: (v: string) => void } = {};
    const running = unlessEnded(new Promise<string>((r) => (work.resolve = r)), cut.signal);
    guard.sessionEnded('cut');
    await expect(running).rejects.toMatchObject({ code: 'unauthorized', reason: 'logged_out' });
    work.resolve?.('too late');
    await expect(unlessEnded(Promise.reject(new Error('late')), cut.signal)).rejects.toMatchObject({
      reason: 'logged_out',
    });
  });
});
