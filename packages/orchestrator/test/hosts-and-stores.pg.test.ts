import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HostCapacityHistory } from '@orch/protocol';
import { describeStores, pgTest, type TestPostgres } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { FAKE_AGENT_IMAGES, FakeAgent } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(12).toString('hex')}`;
const DEFAULT_AGENT_TOKEN = `default-agent-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/** One suite, run against both stores (STYLE.md: Kysely's DIALECTS loop). */
describeStores('orchd on the %s store', (store) => {
  let pg: TestPostgres | undefined;
  let dataDir: string;
  let env: Record<string, string>;
  let orchd: OrchdProcess;
  const agents: FakeAgent[] = [];
  const agent = async (token = AGENT_TOKEN, info = {}) => {
    const a = await FakeAgent.start(token, info);
    agents.push(a);
    return a;
  };
  const as = { token: MASTER };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const opened = await openStore(store);
    pg = opened.server;
    dataDir = await tempDir('orchd-data-');
    env = orchdStoreEnv(opened, dataDir);
    env = {
      ...env,
      ORCH_AUTH_TOKEN: MASTER,
      MICROVM_AGENT_TOKEN: DEFAULT_AGENT_TOKEN,
      ORCH_HOST_HEALTH_INTERVAL_SEC: '1',
    };
    orchd = await OrchdProcess.start(env);
  });

  afterAll(async () => {
    await orchd?.stop();
    await Promise.all(agents.map((a) => a.close()));
  });

  describe('hosts', () => {
    test('registration dials the agent, learns topology and capacity, and never returns the token', async () => {
      const a = await agent();
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: `${a.url}/`, agent_token: AGENT_TOKEN },
      });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({
        id: a.info.id,
        kind: 'microvm',
        agent_url: a.url,
        token_source: 'registered',
        arch: 'amd64',
        accelerator: 'tcg',
        state: 'active',
        health: 'healthy',
        capacity: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
        images: [...FAKE_AGENT_IMAGES],
      });
      expect(a.requests).toBe(1);
      const list = await orchd.request('GET', '/v1/hosts', as);
      const one = await orchd.request('GET', `/v1/hosts/${a.info.id}`, as);
      expect(one.body).toEqual(expect.objectContaining({ id: a.info.id }));
      for (const body of [r.body, list.body, one.body])
        expect(JSON.stringify(body)).not.toContain(AGENT_TOKEN);
    });

    test('re-registering an id replaces its provider details and keeps its state', async () => {
      const a = await agent();
      const b = await agent('other-token');
      await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-replace', kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      await orchd.request('POST', '/v1/hosts/h-replace?action=cordon', as);
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-replace', kind: 'microvm', agent_url: b.url, agent_token: 'other-token' },
      });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: 'h-replace', agent_url: b.url, state: 'cordoned' });
    });

    test('a microvm host registered without a token uses MICROVM_AGENT_TOKEN; a gpu host needs one', async () => {
      const a = await agent(DEFAULT_AGENT_TOKEN);
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-default', kind: 'microvm', agent_url: a.url },
      });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ token_source: 'default', health: 'healthy' });
      const gpu = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'gpu', agent_url: a.url },
      });
      expect(gpu.status).toBe(400);
      expect(gpu.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining('agent_token is required') },
      });
    });

    test('an agent that refuses the token surfaces as http 401', async () => {
      const a = await agent();
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: a.url, agent_token: 'wrong' },
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining('http 401') },
      });
    });

    test('a gpu agent registered as microvm is refused', async () => {
      const a = await agent(AGENT_TOKEN, { kind: 'gpu' });
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      expect(r.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining('is a gpu host') },
      });
    });

    test.each([
      ['ftp://HOST/', 'scheme must be http or https'],
      ['file:///etc/passwd', 'scheme must be http or https'],
      ['http://user:pass@HOST', 'must not embed credentials'],
      ['http://user@HOST', 'must not embed credentials'],
      ['http://@HOST', 'agent_url must not embed credentials'],
      ['http://HOST/?x=1', 'must not have a query string'],
      ['http://HOST/?', 'must not have a query string'],
      ['http://HOST/#frag', 'must not have a fragment'],
      ['http://HOST/#', 'must not have a fragment'],
      ['not a url', 'is not a URL'],
    ])('agent URL %s is rejected before any dial', async (template, reason) => {
      const a = await agent();
      const url = template.replace('HOST', a.url.slice('http://'.length));
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: url, agent_token: AGENT_TOKEN },
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining(reason) },
      });
      expect(a.requests).toBe(0);
    });

    const METADATA = '169.254.0.0/16, where the cloud metadata service answers';
    test.each([
      ['http://169.254.169.254/', `169.254.169.254 is link-local (${METADATA})`],
      ['http://2852039166:9090', `2852039166 (169.254.169.254) is link-local (${METADATA})`],
      [
        'http://[::ffff:169.254.169.254]/',
        `[::ffff:169.254.169.254] ([::ffff:a9fe:a9fe]) is link-local (it embeds 169.254.169.254, in ${METADATA})`,
      ],
      ['http://[fe80::1]:9090', '[fe80::1] is link-local (fe80::/10)'],
    ])('a link-local agent URL %s is refused before any dial', async (url, why) => {
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: url, agent_token: AGENT_TOKEN },
      });
      // Dialled, it would be 503 (nothing answers there), not 400.
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        error: {
          code: 'invalid_argument',
          message: `agent_url host ${why}; agents are never dialled there`,
          details: { field: 'agent_url' },
        },
      });
    });

    test('a redirecting agent is not followed', async () => {
      const target = await agent();
      const redirecting = await agent();
      redirecting.redirectTo = `${target.url}/v1/info`;
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: redirecting.url, agent_token: AGENT_TOKEN },
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({
        error: {
          code: 'invalid_argument',
          message: expect.stringContaining('redirects from agents are never followed'),
        },
      });
      expect(redirecting.requests).toBe(1);
      expect(target.requests).toBe(0);
    });

    test('an unreachable agent is unavailable', async () => {
      const a = await agent();
      const url = a.url;
      await a.close();
      const r = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { kind: 'microvm', agent_url: url, agent_token: AGENT_TOKEN },
      });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({
        error: { code: 'unavailable', message: expect.stringContaining('could not reach the agent') },
      });
    });

    test('cordon, uncordon, delete; unknown ids are not_found', async () => {
      const a = await agent();
      await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-life', kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      expect((await orchd.request('POST', '/v1/hosts/h-life?action=cordon', as)).body).toMatchObject({
        state: 'cordoned',
      });
      expect((await orchd.request('POST', '/v1/hosts/h-life?action=uncordon', as)).body).toMatchObject({
        state: 'active',
      });
      const bad = await orchd.request('POST', '/v1/hosts/h-life?action=explode', as);
      expect(bad.status).toBe(400);
      expect((await orchd.request('DELETE', '/v1/hosts/h-life', as)).status).toBe(204);
      for (const [method, path] of [
        ['GET', '/v1/hosts/h-life'],
        ['DELETE', '/v1/hosts/h-life'],
        ['POST', '/v1/hosts/h-life?action=cordon'],
      ] as const) {
        const r = await orchd.request(method, path, as);
        expect(r.status).toBe(404);
        expect(r.body).toEqual({
          error: { code: 'not_found', message: 'host "h-life" not found', details: { id: 'h-life' } },
        });
      }
    });

    test('the health monitor notices an agent going away and coming back', async () => {
      const a = await agent();
      await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-health', kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      a.token = 'rotated';
      await expect
        .poll(
          async () =>
            ((await orchd.request('GET', '/v1/hosts/h-health', as)).body as { health: string }).health,
          { timeout: 15_000 },
        )
        .toBe('unauthorized');
      a.token = AGENT_TOKEN;
      await expect
        .poll(
          async () =>
            ((await orchd.request('GET', '/v1/hosts/h-health', as)).body as { health: string }).health,
          { timeout: 15_000 },
        )
        .toBe('healthy');
    });
  });

  describe('capacity history', () => {
    test('follows what the agent reports at each health check, in buckets; bad windows are refused', async () => {
      const a = await agent();
      await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-cap', kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      const history = async (query = '') =>
        (await orchd.request('GET', `/v1/hosts/h-cap/capacity${query}`, as)).body as HostCapacityHistory;
      await expect.poll(async () => (await history()).samples.length, { timeout: 15_000 }).toBeGreaterThan(0);
      const first = await history();
      expect(first).toMatchObject({ host_id: 'h-cap', minutes: 60, bucket_seconds: 30 });
      expect(first.samples[0]).toEqual({
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        capacity: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
        free: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      });
      // Two environments' worth taken elsewhere on the host: the history shows the busier moment.
      a.info = { ...a.info, free: { cpus: 2, ram_mb: 1024, disk_gb: 150 } };
      await expect
        .poll(async () => (await history('?minutes=5')).samples.some((s) => s.free.cpus === 2), {
          timeout: 20_000,
        })
        .toBe(true);
      expect((await history('?minutes=5')).bucket_seconds).toBe(5);

      for (const bad of ['?minutes=0', '?minutes=1441', '?minutes=abc', '?hours=1']) {
        const r = await orchd.request('GET', `/v1/hosts/h-cap/capacity${bad}`, as);
        expect(r, bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_argument' } } });
      }
      expect((await orchd.request('GET', '/v1/hosts/h-none/capacity', as)).status).toBe(404);
      expect((await orchd.request('GET', '/v1/hosts/h-cap/capacity')).status).toBe(401);
      expect((await orchd.request('DELETE', '/v1/hosts/h-cap', as)).status).toBe(204);
      expect((await orchd.request('GET', '/v1/hosts/h-cap/capacity', as)).status).toBe(404);
    });
  });

  describe('the store', () => {
    test('state survives a restart', async () => {
      const a = await agent();
      await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-persist', kind: 'microvm', agent_url: a.url, agent_token: AGENT_TOKEN },
      });
      await orchd.request('POST', '/v1/hosts/h-persist?action=cordon', as);
      expect(await orchd.stop()).toBe(0);
      orchd = await OrchdProcess.start(env);
      const r = await orchd.request('GET', '/v1/hosts/h-persist', as);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        id: 'h-persist',
        state: 'cordoned',
        agent_url: a.url,
        token_source: 'registered',
      });
    });

    test('a store outage answers unavailable, and orchd recovers by itself', async () => {
      // The store is up before the outage begins (the restart just before may still be settling).
      await expect
        .poll(async () => (await orchd.request('GET', '/v1/hosts', as)).status, {
          timeout: 60_000,
          interval: 250,
        })
        .toBe(200);
      if (pg) {
        await pg.halt();
        const down = await orchd.request('GET', '/v1/hosts', as);
        expect(down.status).toBe(503);
        expect(down.body).toMatchObject({ error: { code: 'unavailable' } });
        await pg.resume();
      } else {
        // Freeze the embedded postmaster: queries time out as unavailable; thaw it and they work again.
        const pid = Number(
          readFileSync(join(dataDir, 'pg', 'data', 'postmaster.pid'), 'utf8').split('\n')[0],
        );
        // The postmaster first, so that it forks no backend after the children are listed.
        process.kill(pid, 'SIGSTOP');
        const frozen = [pid, ...childrenOf(pid)];
        for (const p of frozen) process.kill(p, 'SIGSTOP');
        try {
          const down = await orchd.request('GET', '/v1/hosts', as);
          expect(down.status).toBe(503);
          expect(down.body).toMatchObject({ error: { code: 'unavailable' } });
        } finally {
          for (const p of frozen) process.kill(p, 'SIGCONT');
        }
        await expect
          .poll(async () => (await orchd.request('GET', '/v1/hosts', as)).status, { timeout: 30_000 })
          .toBe(200);
        // Kill it outright: orchd's watchdog starts it again.
        process.kill(pid, 'SIGKILL');
      }
      await expect
        .poll(async () => (await orchd.request('GET', '/v1/hosts', as)).status, {
          timeout: 30_000,
          interval: 250,
        })
        .toBe(200);
      // A request may still meet a pooled connection to the dead server once; the pool drops it.
      await expect
        .poll(async () => (await orchd.request('GET', '/v1/hosts/h-persist', as)).status, { timeout: 30_000 })
        .toBe(200);
    });

    test('no token or secret ever reaches the logs', () => {
      const logs = orchd.output.join('\n');
      for (const secret of [MASTER, AGENT_TOKEN, DEFAULT_AGENT_TOKEN, env.TOKEN_ENCRYPTION_KEY ?? MASTER]) {
        expect(logs).not.toContain(secret);
      }
    });
  });
});

/** Child processes of `pid` (Postgres backends of a postmaster), read from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after ")".
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}
