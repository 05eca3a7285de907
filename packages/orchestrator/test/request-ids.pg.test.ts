import { randomBytes } from 'node:crypto';
import type { Environment } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { validEnvironment, waitForState } from './input-cases.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/** Every request has an id: answered in `x-request-id`, on orchd's log lines, and sent to the agent. */
describeStore('server')('request ids', () => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  const logLines = () =>
    orchd.output.flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const env = orchdStoreEnv(await openStore('server'), await tempDir('orchd-rid-'));
    orchd = await OrchdProcess.start({ ...env, ORCH_AUTH_TOKEN: MASTER, ORCH_RECONCILE_INTERVAL_SEC: '60' });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test("a create is followed by the caller's id across orchd's log and the agent call", async () => {
    const rid = `trace-${randomBytes(6).toString('hex')}`;
    const res = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: validEnvironment(),
      headers: { 'x-request-id': rid },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.headers.get('x-request-id')).toBe(rid);
    const id = (res.body as Environment).id;
    await waitForState(orchd, MASTER, id, 'running');

    expect(agent.requestIds).toContainEqual({ method: 'POST', path: '/v1/vms', id: rid });
    const mine = logLines().filter((l) => l.request_id === rid);
    expect(mine.map((l) => l.msg)).toEqual(expect.arrayContaining(['environment placed', 'request']));
    expect(mine.find((l) => l.msg === 'request')).toMatchObject({
      method: 'POST',
      route: '/v1/environments',
      status: 201,
    });
    expect(mine.find((l) => l.msg === 'environment placed')).toMatchObject({ env: id });
  });

  test('without one, or with an invalid one, the request gets a fresh id (the invalid one is not echoed)', async () => {
    const plain = await orchd.request('GET', '/v1/hosts', as);
    const fresh = plain.headers.get('x-request-id');
    expect(fresh).toMatch(/^req_[A-Za-z0-9_-]{22}$/);
    for (const bad of ['has space', 'x'.repeat(129), 'quote"d', 'line\tbreak']) {
      const res = await orchd.request('GET', '/v1/hosts', { ...as, headers: { 'x-request-id': bad } });
      expect(res.status).toBe(200);
      const got = res.headers.get('x-request-id');
      expect(got).toMatch(/^req_/);
      expect(got).not.toBe(fresh);
      expect(orchd.output.some((l) => l.includes(bad))).toBe(false);
    }
  });

  test('refusals carry an id too', async () => {
    const res = await orchd.request('POST', '/v1/environments', { body: validEnvironment() });
    expect(res.status).toBe(401);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const line = logLines().find((l) => l.request_id === res.headers.get('x-request-id'));
    expect(line).toMatchObject({ msg: 'request', status: 401, route: '/v1/environments' });
  });
});
