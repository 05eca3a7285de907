import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { IN_CI, pgTest, TestPostgres } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { WebSocket } from 'ws';
import { FAKE_AGENT_IMAGES, FakeAgent } from './fake-agent.js';
import { validEnvironment, waitForState } from './input-cases.js';
import { OrchdProcess } from './orchd-process.js';

/**
 * What orchd does with what agents answer, and the contract edges around it: a slow-drip agent, an
 * answer with a NUL or over 1 MiB (at registration and in the health monitor), agent errors whose
 * code and details reach the caller, a refused token named as `http 401` at create, and attach
 * without an upgrade or with malformed credentials and ids.
 */
const MASTER = `master-${randomBytes(8).toString('hex')}`;
const TOKEN = `agent-${randomBytes(8).toString('hex')}`;
const skip = !TestPostgres.available() && !IN_CI;
const as = { token: MASTER };
let orchd: OrchdProcess;
const agents: FakeAgent[] = [];
const servers: Server[] = [];

pgTest.beforeAll(async ({ testPostgres }) => {
  orchd = await OrchdProcess.start({
    DATABASE_URL: await testPostgres.createDatabase('agent_answers'),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    ORCH_AUTH_TOKEN: MASTER,
    ORCH_HOST_HEALTH_INTERVAL: '1',
  });
});
afterAll(async () => {
  await orchd?.stop();
  await Promise.all(agents.map((a) => a.close()));
  for (const s of servers) s.close();
});

async function agent(info = {}): Promise<FakeAgent> {
  const a = await FakeAgent.start(TOKEN, info);
  agents.push(a);
  return a;
}

const register = (id: string, agentUrl: string) =>
  orchd.request('POST', '/v1/hosts', {
    ...as,
    body: { id, kind: 'microvm', agent_url: agentUrl, agent_token: TOKEN },
  });

const errorOf = (body: unknown) =>
  (body as { error: { code: string; message: string; details?: Record<string, unknown> } }).error;

/** An agent that answers one byte every 400 ms: all of it, or the headers at once and then the body. */
async function drippingAgent(headersAtOnce: boolean): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => {
      const body = JSON.stringify({ id: 'drip', kind: 'microvm', arch: 'amd64' }).padEnd(2000);
      const head = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
      if (headersAtOnce) socket.write(head);
      let rest = headersAtOnce ? body : head + body;
      const timer = setInterval(() => {
        if (rest === '' || socket.destroyed) return clearInterval(timer);
        socket.write(rest[0]!);
        rest = rest.slice(1);
      }, 400);
      socket.on('close', () => clearInterval(timer));
    });
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe.skipIf(skip)('registration', () => {
  test('an agent that drips its answer is 503 unavailable once the 5 s limit passes, never a 500', async () => {
    const [headersFirst, allDripped] = await Promise.all([
      drippingAgent(true).then((url) => register('drip-body', url)),
      drippingAgent(false).then((url) => register('drip-all', url)),
    ]);
    for (const res of [headersFirst, allDripped]) {
      expect(res.status).toBe(503);
      expect(errorOf(res.body).code).toBe('unavailable');
      expect(errorOf(res.body).message).toMatch(/within 5000 ms/);
    }
    expect((await orchd.request('GET', '/v1/hosts', as)).status).toBe(200);
  });

  test('an info answer with a NUL is a malformed answer: 400 naming the field, nothing stored', async () => {
    for (const info of [{ version: 'v\u0000' }, { images: ['debian\u000012'] }, { accelerator: '\u0000' }]) {
      const a = await agent(info);
      const res = await register('nul-host', a.url);
      expect(res.status, JSON.stringify(info)).toBe(400);
      expect(errorOf(res.body)).toMatchObject({ code: 'invalid_argument' });
      expect(errorOf(res.body).message).toMatch(/malformed answer: .*U\+0000/);
    }
    expect((await orchd.request('GET', '/v1/hosts/nul-host', as)).status).toBe(404);
  });

  test("an info answer over 1 MiB is refused (the README's limit), not read to 64 MiB", async () => {
    const a = await agent({
      images: Array.from({ length: 40_000 }, (_, i) => `image-${i}-${'x'.repeat(20)}`),
    });
    const res = await register('big-host', a.url);
    expect(res.status).toBe(400);
    expect(errorOf(res.body).message).toContain(`larger than ${1 << 20} bytes`);
  });
});

describe.skipIf(skip)('the health monitor', () => {
  test('marks a host error when its answer has a NUL or is too large, and unauthorized on a token mismatch', async () => {
    const a = await agent();
    expect((await register('watched', a.url)).status).toBe(201);
    const health = async () =>
      (await orchd.request('GET', '/v1/hosts/watched', as)).body as { health: string; health_detail: string };
    /** Waits until the monitor has recorded `want` with a detail matching `detail`. */
    const until = async (want: string, detail = /.*/) => {
      for (let n = 0; n < 100; n++) {
        const h = await health();
        if (h.health === want && detail.test(h.health_detail ?? '')) return h;
        await new Promise((r) => setTimeout(r, 100));
      }
      return health();
    };
    a.info = { ...a.info, version: 'v\u0000' };
    expect((await until('error', /U\+0000/)).health_detail).toMatch(/U\+0000/);
    a.info = {
      ...a.info,
      version: 'ok',
      images: Array.from({ length: 40_000 }, (_, i) => `i${i}${'y'.repeat(24)}`),
    };
    expect((await until('error', /larger than/)).health_detail).toMatch(/larger than/);
    a.info = { ...a.info, images: [...FAKE_AGENT_IMAGES] };
    expect((await until('healthy')).health).toBe('healthy');

    // The agent's token changes: the monitor sees http 401, and a create names it.
    a.token = 'rotated-on-the-agent';
    expect((await until('unauthorized')).health_detail).toContain('http 401');
    const res = await orchd.request('POST', '/v1/environments', { ...as, body: validEnvironment() });
    expect(res.status).toBe(503);
    expect(errorOf(res.body).message).toContain('health unauthorized');
    expect(errorOf(res.body).message).toContain('http 401');
    a.token = TOKEN;
    await until('healthy');
    expect((await orchd.request('DELETE', '/v1/hosts/watched', as)).status).toBe(204);
  });
});

describe.skipIf(skip)('agent errors keep their code and details', () => {
  test('conflict stays 409, disk_full reaches the caller, an unknown image lists the available ones', async () => {
    const a = await agent();
    expect((await register('errs', a.url)).status).toBe(201);
    const cases: [number, unknown, number, string, Record<string, unknown>][] = [
      [
        409,
        { error: { code: 'conflict', message: 'VM exists', details: { id: 'x' } } },
        409,
        'conflict',
        { id: 'x' },
      ],
      [
        503,
        {
          error: { code: 'unavailable', message: 'the host disk is full', details: { reason: 'disk_full' } },
        },
        503,
        'unavailable',
        { reason: 'disk_full' },
      ],
      [
        400,
        { error: { code: 'invalid_argument', message: 'no image', details: { available: ['debian-12'] } } },
        400,
        'invalid_argument',
        { available: ['debian-12'] },
      ],
      [
        500,
        { error: { code: 'internal', message: 'boom' } },
        503,
        'unavailable',
        { agent_error: 'internal' },
      ],
    ];
    for (const [agentStatus, agentBody, status, code, details] of cases) {
      a.createFailure = { status: agentStatus, body: agentBody };
      const res = await orchd.request('POST', '/v1/environments', { ...as, body: validEnvironment() });
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      expect(errorOf(res.body).code).toBe(code);
      expect(errorOf(res.body).details).toMatchObject(details);
    }
    a.createFailure = undefined;
    expect((await orchd.request('DELETE', '/v1/hosts/errs', as)).status).toBe(204);
  });
});

describe.skipIf(skip)('attach', () => {
  test('a plain GET is the auth decision (403 for an API key, 426 for the master), never route_not_found', async () => {
    const a = await agent();
    expect((await register('attach-host', a.url)).status).toBe(201);
    const created = await orchd.request('POST', '/v1/environments', { ...as, body: validEnvironment() });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    await waitForState(orchd, MASTER, id, 'running');
    const key = await orchd.request('POST', '/v1/api-keys', { ...as, body: { label: 'attach' } });
    const apiKey = (key.body as { secret: string }).secret;

    const byKey = await orchd.request('GET', `/v1/environments/${id}/attach`, { token: apiKey });
    expect(byKey.status).toBe(403);
    expect(errorOf(byKey.body).code).toBe('unauthorized');
    const byMaster = await orchd.request('GET', `/v1/environments/${id}/attach`, as);
    expect(byMaster.status).toBe(426);
    expect(errorOf(byMaster.body)).toMatchObject({ code: 'invalid_argument' });
    expect(errorOf(byMaster.body).message).toMatch(/WebSocket/);
    expect((await orchd.request('GET', '/v1/environments/env_nope/attach', as)).status).toBe(404);

    // Upgrades: a malformed cookie is a credential check (401), an id like %ff is 404.
    const upgrade = (path: string, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${orchd.url.replace('http', 'ws')}${path}`, { headers });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => {
          ws.close();
          reject(new Error('upgraded'));
        });
        ws.once('error', reject);
      });
    for (const cookie of [
      'orch_session=%ff',
      'orch_session=%',
      'orch_session=%E0%A4%A',
      'orch_session="%zz"',
    ]) {
      expect(await upgrade(`/v1/environments/${id}/attach`, { cookie }), cookie).toBe(401);
    }
    for (const bad of ['%ff', '%00', 'a%00b', '%c3%28']) {
      expect(
        await upgrade(`/v1/environments/${bad}/attach`, { authorization: `Bearer ${MASTER}` }),
        bad,
      ).toBe(404);
    }
    await orchd.request('DELETE', `/v1/environments/${id}`, as);
  });
});
