import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { describeOnServerPostgres, describeStores, pgTest } from '@support/pg/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { WebSocket } from 'ws';
import { SessionSigner } from '../src/auth/session-cookie.js';
import { OrchdProcess, orchdStoreEnv, tempDataDir } from './orchd-process.js';

const MASTER = `master-${randomBytes(12).toString('hex')}`;
const DAY_MS = 24 * 3600 * 1000;

/** Logs in and returns the `orch_session=<value>` pair, as a browser would keep it (and an attacker copy it). */
async function login(orchd: OrchdProcess): Promise<string> {
  const r = await orchd.request('POST', '/login', { body: { token: MASTER } });
  expect(r.status).toBe(200);
  return r.headers.get('set-cookie')!.split(';')[0]!;
}

/** What the dashboard sends: the cookie on a same-origin JSON request. */
const asBrowser = (cookie: string) => ({ cookie, headers: { 'content-type': 'application/json' } });

const logout = (orchd: OrchdProcess, cookie?: string) =>
  orchd.request('POST', '/logout', cookie === undefined ? { body: {} } : { ...asBrowser(cookie), body: {} });

/** The status of a console (WebSocket) upgrade sent with this cookie. */
function attachStatus(orchd: OrchdProcess, cookie: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${orchd.url.replace('http', 'ws')}/v1/environments/missing/attach`, {
      headers: { cookie },
    });
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('open', () => {
      ws.close();
      reject(new Error('the console upgrade was accepted'));
    });
    ws.once('error', () => undefined);
  });
}

/** The session id inside a cookie value (payload `{sid, exp}` before the MAC). */
function sidOf(cookie: string): string {
  const payload = cookie.split('=')[1]!.split('.')[0]!;
  return (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sid: string }).sid;
}

describeStores('browser sessions on the %s store', (store) => {
  let env: Record<string, string>;
  let orchd: OrchdProcess;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const opened = await openStore(store);
    env = {
      ...orchdStoreEnv(opened, await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_EVENTS_HEARTBEAT_SEC: '1',
    };
    orchd = await OrchdProcess.start(env);
  });
  afterAll(async () => {
    await orchd?.stop();
  });

  test('after logout the copied cookie is refused like a forged one: API, events, console, dashboard, and after a restart', async () => {
    const cookie = await login(orchd);
    expect((await orchd.request('GET', '/v1/hosts', { cookie })).status).toBe(200);
    expect(await attachStatus(orchd, cookie)).toBe(404);

    const out = await logout(orchd, cookie);
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ authenticated: false, auth: 'required' });
    expect(out.headers.get('set-cookie')).toMatch(/^orch_session=;.*Max-Age=0/);

    const forged = await orchd.request('GET', '/v1/hosts', { cookie: 'orch_session=forged.value' });
    const reused = await orchd.request('GET', '/v1/hosts', { cookie });
    expect(forged.status).toBe(401);
    expect([reused.status, reused.body]).toEqual([forged.status, forged.body]);
    expect(reused.headers.get('www-authenticate')).toBe(forged.headers.get('www-authenticate'));
    expect((await orchd.request('POST', '/v1/hosts/missing?action=cordon', asBrowser(cookie))).status).toBe(
      401,
    );
    expect((await orchd.request('GET', '/v1/events', { cookie })).status).toBe(401);
    expect(await attachStatus(orchd, cookie)).toBe(401);
    expect((await orchd.request('GET', '/session', { cookie })).body).toMatchObject({ authenticated: false });
    const home = await fetch(`${orchd.url}/`, { headers: { cookie }, redirect: 'manual' });
    expect([home.status, home.headers.get('location')]).toEqual([302, '/login']);

    expect(await orchd.stop()).toBe(0);
    orchd = await OrchdProcess.start(env);
    expect((await orchd.request('GET', '/v1/hosts', { cookie })).status).toBe(401);
    const fresh = await login(orchd);
    expect((await orchd.request('GET', '/v1/hosts', { cookie: fresh })).status).toBe(200);
  });

  test('an event stream opened with the session ends with an error event once the session is logged out', async () => {
    const cookie = await login(orchd);
    const res = await fetch(`${orchd.url}/v1/events`, { headers: { cookie } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes(': events')) text += decoder.decode((await reader.read()).value);
    expect((await logout(orchd, cookie)).status).toBe(200);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toMatch(/event: error\ndata: \{"error":\{"code":"unauthorized"/);
  });

  test('logout ends only its own session, and ending it twice is fine', async () => {
    const [a, b] = [await login(orchd), await login(orchd)];
    expect((await logout(orchd, a)).status).toBe(200);
    expect((await logout(orchd, a)).status).toBe(200);
    expect((await orchd.request('GET', '/v1/hosts', { cookie: a })).status).toBe(401);
    expect((await orchd.request('GET', '/v1/hosts', { cookie: b })).status).toBe(200);
  });

  test('logout without a live session (no cookie, garbage, expired, another master token) just clears the cookie', async () => {
    const expired = new SessionSigner(MASTER).issue(Date.now() - 8 * DAY_MS);
    const foreign = new SessionSigner('another master').issue();
    for (const cookie of [
      undefined,
      'orch_session=garbage',
      'orch_session=a.b.c',
      `orch_session=${expired}`,
      `orch_session=${foreign}`,
    ]) {
      const r = await logout(orchd, cookie);
      expect(r.status, cookie).toBe(200);
      expect(r.headers.get('set-cookie'), cookie).toMatch(/^orch_session=;.*Max-Age=0/);
    }
  });
});

describeOnServerPostgres('browser sessions of two orchds on one database', () => {
  let url: string;
  let a: OrchdProcess;
  let b: OrchdProcess;

  pgTest.beforeAll(async ({ testPostgres }) => {
    url = await testPostgres.createDatabase('sessions_shared');
    const env = { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: 'cd'.repeat(32), ORCH_AUTH_TOKEN: MASTER };
    [a, b] = await Promise.all([OrchdProcess.start(env), OrchdProcess.start(env)]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  test('a session logged out on one orchd is refused at once by the other, which had just accepted it', async () => {
    const cookie = await login(a);
    expect((await b.request('GET', '/v1/hosts', { cookie })).status).toBe(200);
    expect((await a.request('GET', '/v1/hosts', { cookie })).status).toBe(200);
    expect((await b.request('POST', '/logout', { ...asBrowser(cookie), body: {} })).status).toBe(200);
    expect((await a.request('GET', '/v1/hosts', { cookie })).status).toBe(401);
    expect((await b.request('GET', '/v1/hosts', { cookie })).status).toBe(401);
  });

  test('the store keeps a SHA-256 of the session id with its expiry, and drops rows a day past expiry at the next logout', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(
        `INSERT INTO revoked_sessions (sid_sha256, expires_at) VALUES
           ('long-expired', now() - interval '25 hours'), ('just-expired', now() - interval '1 hour')`,
      );
      const cookie = await login(a);
      const sid = sidOf(cookie);
      expect((await logout(a, cookie)).status).toBe(200);
      const { rows } = await client.query<{ sid_sha256: string; expires_at: Date }>(
        'SELECT sid_sha256, expires_at FROM revoked_sessions',
      );
      const keys = rows.map((r) => r.sid_sha256);
      expect(keys).toContain(createHash('sha256').update(sid).digest('hex'));
      expect(keys).not.toContain(sid);
      expect(keys).toContain('just-expired');
      expect(keys).not.toContain('long-expired');
      const row = rows.find((r) => r.sid_sha256 === createHash('sha256').update(sid).digest('hex'))!;
      const exp = new SessionSigner(MASTER).open(cookie.split('=')[1]!)!.exp;
      expect(row.expires_at.getTime()).toBe(exp * 1000);
    } finally {
      await client.end();
    }
  });
});

/** POST /login from a chosen local address (the whole of 127.0.0.0/8 is loopback on Linux). */
function loginFrom(orchd: OrchdProcess, localAddress: string, token: string) {
  return new Promise<{ status: number; retryAfter: string | undefined; body: unknown; cookie: boolean }>(
    (resolve, reject) => {
      const req = httpRequest(
        `${orchd.url}/login`,
        { method: 'POST', localAddress, headers: { 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: res.headers['retry-after'],
              body: JSON.parse(text),
              cookie: res.headers['set-cookie'] !== undefined,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ token }));
    },
  );
}

describe('the login throttle of a running orchd (ORCH_LOGIN_MAX_FAILURES=3)', () => {
  const data = tempDataDir();
  let orchd: OrchdProcess;
  beforeAll(async () => {
    orchd = await OrchdProcess.start({
      ORCH_DATA_DIR: data.dir,
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_LOGIN_MAX_FAILURES: '3',
    });
  });
  afterAll(async () => {
    await orchd?.stop();
    data.cleanup();
  });

  test('after 3 wrong tokens from one address even the right one gets 429 with Retry-After; another address logs in', async () => {
    for (let i = 0; i < 3; i++) expect((await loginFrom(orchd, '127.0.0.1', 'wrong')).status).toBe(401);
    const refused = await loginFrom(orchd, '127.0.0.1', MASTER);
    expect(refused.status).toBe(429);
    expect(refused.cookie).toBe(false);
    expect(refused.body).toMatchObject({
      error: { code: 'unavailable', details: { reason: 'rate_limited' } },
    });
    const seconds = Number(refused.retryAfter);
    expect(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60, refused.retryAfter).toBe(true);
    expect((refused.body as { error: { details: { retry_after_seconds: number } } }).error.details).toEqual({
      reason: 'rate_limited',
      retry_after_seconds: seconds,
    });
    // X-Forwarded-For is not trusted: the socket's address is what counts.
    const forwarded = await orchd.request('POST', '/login', {
      body: { token: MASTER },
      headers: { 'x-forwarded-for': '198.51.100.7' },
    });
    expect(forwarded.status).toBe(429);

    const other = await loginFrom(orchd, '127.0.0.2', MASTER);
    expect(other.status).toBe(200);
    expect(other.cookie).toBe(true);
  });
});
