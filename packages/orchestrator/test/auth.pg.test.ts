import { randomBytes } from 'node:crypto';
import { IN_CI, pgTest, TestPostgres } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { OrchdProcess, tempDataDir } from './orchd-process.js';

const skip = !TestPostgres.available() && !IN_CI;

const MASTER = `master-${randomBytes(12).toString('hex')}`;
const KEY = randomBytes(32).toString('base64');

/** The four configurations of master token x key store (orchestrator.md, "Authentication"). */
type ConfigName = 'open' | 'master-only' | 'master+keys' | 'keys-only';
const CONFIGS: Record<ConfigName, { master: boolean; keys: boolean }> = {
  open: { master: false, keys: false },
  'master-only': { master: true, keys: false },
  'master+keys': { master: true, keys: true },
  'keys-only': { master: false, keys: true },
};

type PrincipalName =
  | 'none'
  | 'wrong token'
  | 'master'
  | 'api key'
  | 'revoked key'
  | 'cookie'
  | 'bad header + good cookie'
  | 'master header + bad cookie';

const ROUTES: readonly { method: string; path: string; body?: unknown; master: boolean }[] = [
  { method: 'POST', path: '/v1/api-keys', body: { label: 'matrix' }, master: true },
  { method: 'GET', path: '/v1/api-keys', master: true },
  { method: 'DELETE', path: '/v1/api-keys/key_missing', master: true },
  {
    method: 'POST',
    path: '/v1/hosts',
    body: { kind: 'microvm', agent_url: 'ftp://not-dialled' },
    master: true,
  },
  { method: 'POST', path: '/v1/hosts/missing?action=cordon', master: true },
  { method: 'POST', path: '/v1/hosts/missing?action=uncordon', master: true },
  { method: 'DELETE', path: '/v1/hosts/missing', master: true },
  { method: 'POST', path: '/v1/environments/missing?action=exec', body: { argv: ['true'] }, master: true },
  { method: 'POST', path: '/v1/environments/missing?action=pause', master: false },
  { method: 'POST', path: '/v1/environments/missing?action=resume', master: false },
  { method: 'GET', path: '/v1/hosts', master: false },
  { method: 'GET', path: '/v1/environments', master: false },
  { method: 'GET', path: '/v1/snapshots/missing', master: false },
  { method: 'GET', path: '/v1/hosts/missing', master: false },
];

/** What the spec says must happen: admitted, 401 (no or bad credentials) or 403 (API key on a master-only route). */
function expected(
  config: ConfigName,
  principal: PrincipalName,
  masterRoute: boolean,
): 'admitted' | 401 | 403 {
  const c = CONFIGS[config];
  if (!c.master && !c.keys) return 'admitted';
  const who: 'master' | 'key' | undefined = {
    none: undefined,
    'wrong token': undefined,
    master: c.master ? 'master' : undefined,
    'api key': c.keys ? 'key' : undefined,
    'revoked key': undefined,
    cookie: c.master ? 'master' : undefined,
    'bad header + good cookie': undefined,
    'master header + bad cookie': c.master ? 'master' : undefined,
  }[principal] as 'master' | 'key' | undefined;
  if (!who) return 401;
  return masterRoute && who === 'key' ? 403 : 'admitted';
}

describe.skipIf(skip)(
  'the authentication matrix: 4 configurations x 8 callers x every master-only route and open ones',
  () => {
    const dirs: ReturnType<typeof tempDataDir>[] = [];
    const orchd = {} as Record<ConfigName, OrchdProcess>;
    const creds = {} as Record<ConfigName, Record<PrincipalName, { token?: string; cookie?: string }>>;

    pgTest.beforeAll(async ({ testPostgres }) => {
      const url = await testPostgres.createDatabase('auth_matrix');
      const embedded = () => {
        const d = tempDataDir();
        dirs.push(d);
        return { ORCH_DATA_DIR: d.dir };
      };
      [orchd.open, orchd['master-only'], orchd['master+keys'], orchd['keys-only']] = await Promise.all([
        OrchdProcess.start(embedded()),
        OrchdProcess.start({ ...embedded(), ORCH_AUTH_TOKEN: MASTER }),
        OrchdProcess.start({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: KEY, ORCH_AUTH_TOKEN: MASTER }),
        OrchdProcess.start({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: KEY }),
      ]);
      const minted = await orchd['master+keys'].request('POST', '/v1/api-keys', {
        token: MASTER,
        body: { label: 'matrix key' },
      });
      const revoked = await orchd['master+keys'].request('POST', '/v1/api-keys', {
        token: MASTER,
        body: { label: 'revoked' },
      });
      const revokedId = (revoked.body as { id: string }).id;
      expect(
        (await orchd['master+keys'].request('DELETE', `/v1/api-keys/${revokedId}`, { token: MASTER })).status,
      ).toBe(204);
      const key = (minted.body as { secret: string }).secret;
      const revokedKey = (revoked.body as { secret: string }).secret;
      // A valid session cookie, from a login on an orchd that has the master token.
      const login = await orchd['master+keys'].request('POST', '/login', { body: { token: MASTER } });
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      for (const name of Object.keys(CONFIGS) as ConfigName[]) {
        creds[name] = {
          none: {},
          'wrong token': { token: 'orch_key_wrong' },
          master: { token: MASTER },
          'api key': { token: key },
          'revoked key': { token: revokedKey },
          cookie: { cookie },
          'bad header + good cookie': { token: 'wrong', cookie },
          'master header + bad cookie': { token: MASTER, cookie: 'orch_session=forged.value' },
        };
      }
    });

    afterAll(async () => {
      await Promise.all(Object.values(orchd).map((o) => o?.stop()));
      for (const d of dirs) d.cleanup();
    });

    const cases = (Object.keys(CONFIGS) as ConfigName[]).flatMap((config) =>
      (
        [
          'none',
          'wrong token',
          'master',
          'api key',
          'revoked key',
          'cookie',
          'bad header + good cookie',
          'master header + bad cookie',
        ] as PrincipalName[]
      ).map((principal) => [config, principal] as const),
    );

    test.each(cases)('%s, caller: %s', async (config, principal) => {
      for (const r of ROUTES) {
        const c = creds[config][principal];
        // Cookie callers are browsers running the dashboard, which always sends same-origin JSON.
        const headers: Record<string, string> =
          c.cookie !== undefined ? { 'content-type': 'application/json' } : {};
        const res = await orchd[config].request(r.method, r.path, {
          ...c,
          headers,
          ...(r.body ? { body: r.body } : {}),
        });
        const want = expected(config, principal, r.master);
        const where = `${r.method} ${r.path} -> ${res.status} ${JSON.stringify(res.body)}`;
        if (want === 'admitted') {
          expect([401, 403], where).not.toContain(res.status);
        } else {
          expect(res.status, where).toBe(want);
          expect((res.body as { error: { code: string } }).error.code, where).toBe('unauthorized');
          if (want === 401)
            expect(res.headers.get('www-authenticate'), where).toMatch(/^Bearer realm="orchd"/);
        }
      }
    });

    test('attach (a WebSocket upgrade) is master-only too: 401 without credentials, 403 for an API key', async () => {
      const { WebSocket } = await import('ws');
      const status = (o: OrchdProcess, token?: string) =>
        new Promise<number>((resolve) => {
          const ws = new WebSocket(`${o.url.replace('http', 'ws')}/v1/environments/missing/attach`, {
            headers: token ? { authorization: `Bearer ${token}` } : {},
          });
          ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
          ws.once('error', () => undefined);
        });
      const o = orchd['master+keys'];
      expect(await status(o)).toBe(401);
      expect(await status(o, creds['master+keys']['api key'].token)).toBe(403);
      expect(await status(o, MASTER)).toBe(404);
    });

    test('a browser session cannot change state with a non-JSON or cross-origin request', async () => {
      const o = orchd['master+keys'];
      const { cookie } = creds['master+keys'].cookie;
      const form = await o.request('POST', '/v1/hosts/missing?action=cordon', {
        cookie: cookie!,
        body: 'x=1',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(form.status).toBe(403);
      expect(form.body).toMatchObject({
        error: { code: 'unauthorized', message: expect.stringContaining('same-origin JSON') },
      });
      const crossOrigin = await o.request('DELETE', '/v1/hosts/missing', {
        cookie: cookie!,
        headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      });
      expect(crossOrigin.status).toBe(403);
      expect(crossOrigin.body).toMatchObject({
        error: { message: 'cross-origin request from http://evil.example refused' },
      });
      // A bearer token is not a browser session: no such rule.
      const bearer = await o.request('POST', '/v1/hosts/missing?action=cordon', {
        token: MASTER,
        body: 'x=1',
        headers: { 'content-type': 'text/plain' },
      });
      expect(bearer.status).toBe(404);
    });

    test('revoking a key takes effect on the next request on every orchd sharing the database', async () => {
      const created = await orchd['master+keys'].request('POST', '/v1/api-keys', {
        token: MASTER,
        body: { label: 'short-lived' },
      });
      const { id, secret } = created.body as { id: string; secret: string };
      expect((await orchd['keys-only'].request('GET', '/v1/hosts', { token: secret })).status).toBe(200);
      expect(
        (await orchd['master+keys'].request('DELETE', `/v1/api-keys/${id}`, { token: MASTER })).status,
      ).toBe(204);
      expect((await orchd['keys-only'].request('GET', '/v1/hosts', { token: secret })).status).toBe(401);
      expect((await orchd['master+keys'].request('GET', '/v1/hosts', { token: secret })).status).toBe(401);
    });

    test('keys: the secret is shown once, recognisable and long; lists show neither it nor its hash', async () => {
      const created = await orchd['master+keys'].request('POST', '/v1/api-keys', {
        token: MASTER,
        body: { label: 'ci deploy' },
      });
      expect(created.status).toBe(201);
      const key = created.body as { id: string; label: string; hint: string; secret: string };
      expect(key.secret).toMatch(/^orch_key_[A-Za-z0-9_-]{43}$/);
      expect(key.hint).toBe(`orch_key_...${key.secret.slice(-4)}`);
      const list = await orchd['master+keys'].request('GET', '/v1/api-keys', { token: MASTER });
      const entry = (list.body as { api_keys: Record<string, unknown>[] }).api_keys.find(
        (k) => k.id === key.id,
      )!;
      expect(Object.keys(entry).sort()).toEqual(['created_at', 'hint', 'id', 'label', 'last_used_at']);
      const { createHash } = await import('node:crypto');
      const hash = createHash('sha256').update(key.secret).digest('hex');
      expect(JSON.stringify(list.body)).not.toContain(key.secret);
      expect(JSON.stringify(list.body)).not.toContain(hash);
      // Used once: last_used_at is set.
      await orchd['keys-only'].request('GET', '/v1/hosts', { token: key.secret });
      const after = await orchd['master+keys'].request('GET', '/v1/api-keys', { token: MASTER });
      expect(
        (after.body as { api_keys: { id: string; last_used_at: string | null }[] }).api_keys.find(
          (k) => k.id === key.id,
        )!.last_used_at,
      ).not.toBeNull();
    });

    test('without DATABASE_URL the key routes say a database is needed', async () => {
      const r = await orchd['master-only'].request('POST', '/v1/api-keys', {
        token: MASTER,
        body: { label: 'x' },
      });
      expect(r.status).toBe(501);
      expect(r.body).toMatchObject({
        error: { code: 'unimplemented', message: expect.stringContaining('DATABASE_URL') },
      });
    });

    describe('browser session', () => {
      test('login sets an HttpOnly, SameSite=Lax, 7-day orch_session cookie that is not the master token', async () => {
        const r = await orchd['master-only'].request('POST', '/login', { body: { token: MASTER } });
        expect(r.status).toBe(200);
        expect(r.body).toEqual({ authenticated: true, auth: 'required' });
        const cookie = r.headers.get('set-cookie')!;
        expect(cookie).toMatch(/^orch_session=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+;/);
        expect(cookie).toContain('Max-Age=604800');
        expect(cookie).toContain('HttpOnly');
        expect(cookie).toContain('SameSite=Lax');
        expect(cookie).toContain('Path=/');
        expect(cookie).not.toContain('Secure');
        expect(cookie).not.toContain(MASTER);
      });

      test('a wrong token at /login sets nothing', async () => {
        const r = await orchd['master-only'].request('POST', '/login', { body: { token: 'wrong' } });
        expect(r.status).toBe(401);
        expect(r.headers.get('set-cookie')).toBeNull();
        expect(r.body).toMatchObject({ error: { code: 'unauthorized' } });
      });

      test('a malformed login body is invalid_argument', async () => {
        const r = await orchd['master-only'].request('POST', '/login', { body: { password: MASTER } });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ error: { code: 'invalid_argument' } });
      });

      test('logout clears the cookie', async () => {
        const r = await orchd['master-only'].request('POST', '/logout', {});
        expect(r.status).toBe(200);
        expect(r.headers.get('set-cookie')).toMatch(/^orch_session=;.*Max-Age=0/);
      });

      test('with pass-through auth, login answers that authentication is disabled', async () => {
        const r = await orchd.open.request('POST', '/login', { body: { token: 'anything' } });
        expect(r.body).toEqual({ authenticated: true, auth: 'disabled' });
      });
    });
  },
);

describe('settings that change the answer', () => {
  const dirs: ReturnType<typeof tempDataDir>[] = [];
  const started: OrchdProcess[] = [];
  const start = async (env: Record<string, string>) => {
    const d = tempDataDir();
    dirs.push(d);
    const o = await OrchdProcess.start({ ORCH_DATA_DIR: d.dir, ...env });
    started.push(o);
    return o;
  };
  afterAll(async () => {
    await Promise.all(started.map((o) => o.stop()));
    for (const d of dirs) d.cleanup();
  });

  test('ORCH_SECURE_COOKIES=true marks the cookie Secure', async () => {
    const o = await start({ ORCH_AUTH_TOKEN: MASTER, ORCH_SECURE_COOKIES: 'true' });
    const r = await o.request('POST', '/login', { body: { token: MASTER } });
    expect(r.headers.get('set-cookie')).toContain('Secure');
  });

  test('a client outside ORCH_ALLOWED_CIDRS gets 403 forbidden on every route; inside, it is served', async () => {
    const denied = await start({ ORCH_AUTH_TOKEN: MASTER, ORCH_ALLOWED_CIDRS: '10.0.0.0/8, 192.168.0.0/16' });
    for (const [method, path] of [
      ['GET', '/v1/hosts'],
      ['POST', '/login'],
      ['GET', '/v1/nothing-here'],
    ] as const) {
      const r = await denied.request(method, path, { token: MASTER });
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ error: { code: 'forbidden' } });
    }
    const allowed = await start({ ORCH_AUTH_TOKEN: MASTER, ORCH_ALLOWED_CIDRS: '10.0.0.0/8,127.0.0.0/8' });
    expect((await allowed.request('GET', '/v1/hosts', { token: MASTER })).status).toBe(200);
  });

  test('ORCH_REQUIRE_AUTH=true with a master token starts and requires it', async () => {
    const o = await start({ ORCH_AUTH_TOKEN: MASTER, ORCH_REQUIRE_AUTH: 'true' });
    expect((await o.request('GET', '/v1/hosts')).status).toBe(401);
    expect((await o.request('GET', '/v1/hosts', { token: MASTER })).status).toBe(200);
  });
});
