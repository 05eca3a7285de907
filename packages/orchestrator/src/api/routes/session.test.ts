import { createLogger } from '@support/server';
import { describe, expect, test } from 'vitest';
import { Authenticator } from '../../auth/authenticator.js';
import { BrowserSessions, type RevocationList } from '../../auth/browser-sessions.js';
import { CidrAllowlist } from '../../auth/cidr-allowlist.js';
import { ConnectionGuard } from '../../auth/connection-guard.js';
import { LoginThrottle } from '../../auth/login-throttle.js';
import { SessionSigner } from '../../auth/session-cookie.js';
import { buildApp } from '../app.js';
import { sessionRoutes } from './session.js';

const MASTER = 'the-master-token';

/**
 * The login throttle through the HTTP app, on a clock the test moves (a window must pass, and a
 * test must not wait for it). Client addresses are the socket's, as @hono/node-server binds them.
 */
function app(maxFailures: number) {
  const clock = { now: 1_000_000_000 };
  const rows = new Set<string>();
  const list: RevocationList = {
    revoke: async (sid) => void rows.add(sid),
    isRevoked: async (sid) => rows.has(sid),
    revokedAmong: async (sids) => new Set(sids.filter((sid) => rows.has(sid))),
  };
  const sessions = new BrowserSessions(new SessionSigner(MASTER), list, () => clock.now);
  const auth = new Authenticator(MASTER, undefined, sessions);
  const throttle = new LoginThrottle({
    maxFailures,
    windowMs: 60_000,
    maxGlobalFailures: 1000,
    now: () => clock.now,
  });
  const logger = createLogger('silent');
  const guard = new ConnectionGuard({ sessions }, 5000, logger, () => clock.now);
  const hono = buildApp(
    { auth, allowlist: new CidrAllowlist([]), logger },
    sessionRoutes(auth, sessions, throttle, false, guard),
  );
  const login = (token: string, from: string) =>
    hono.request(
      '/login',
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) },
      { incoming: { socket: { remoteAddress: from } } },
    );
  return { clock, login };
}

describe('POST /login throttle', () => {
  test('after N wrong tokens the next login, even with the right token, is 429 with Retry-After; other clients are served; after the window it works', async () => {
    const { clock, login } = app(3);
    for (let i = 0; i < 3; i++) expect((await login('wrong', '203.0.113.5')).status).toBe(401);
    clock.now += 15_000;

    const refused = await login(MASTER, '203.0.113.5');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('45');
    expect(refused.headers.get('set-cookie')).toBeNull();
    expect(await refused.json()).toEqual({
      error: {
        code: 'unavailable',
        message: 'too many failed logins: try again in 45 s',
        details: { reason: 'rate_limited', retry_after_seconds: 45 },
      },
    });
    // A refusal does not extend the wait, and the wrong token is refused the same way.
    expect((await login('wrong', '203.0.113.5')).headers.get('retry-after')).toBe('45');

    const other = await login(MASTER, '198.51.100.7');
    expect(other.status).toBe(200);
    expect(other.headers.get('set-cookie')).toMatch(/^orch_session=/);

    clock.now += 44_999;
    expect((await login(MASTER, '203.0.113.5')).status).toBe(429);
    clock.now += 1;
    const after = await login(MASTER, '203.0.113.5');
    expect(after.status).toBe(200);
    expect(after.headers.get('set-cookie')).toMatch(/^orch_session=/);
  });

  test('a successful login resets no count: a client at N-1 failures still has one try left, whoever logged in', async () => {
    const { login } = app(3);
    for (let i = 0; i < 2; i++) expect((await login('wrong', '203.0.113.5')).status).toBe(401);
    expect((await login(MASTER, '203.0.113.5')).status).toBe(200);
    expect((await login(MASTER, '198.51.100.7')).status).toBe(200);
    expect((await login('wrong', '203.0.113.5')).status).toBe(401);
    expect((await login(MASTER, '203.0.113.5')).status).toBe(429);
  });
});
