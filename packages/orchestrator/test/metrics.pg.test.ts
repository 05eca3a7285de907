import { randomBytes } from 'node:crypto';
import type { Environment } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { scrapeMetrics } from '@support/server/testing';
import { afterAll, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { validEnvironment, waitForState } from './input-cases.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/** `GET /metrics` of orchd, scraped and parsed as Prometheus would, moving as work happens. */
describeStore('server')('orchd /metrics', () => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  const scrape = () => scrapeMetrics(`${orchd.url}/metrics`, { authorization: `Bearer ${MASTER}` });

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const env = orchdStoreEnv(await openStore('server'), await tempDir('orchd-metrics-'));
    orchd = await OrchdProcess.start({ ...env, ORCH_AUTH_TOKEN: MASTER, ORCH_RECONCILE_INTERVAL_SEC: '1' });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test('is refused without credentials, like the API', async () => {
    const res = await orchd.request('GET', '/metrics');
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { code: 'unauthorized' } });
  });

  test('process metrics and HTTP requests by route template, never the raw path', async () => {
    await orchd.request('GET', '/v1/environments/env_doesnotexist1', as);
    await orchd.request('GET', '/v1/no/such/route/at-all', as);
    const m = await scrape();
    expect(m.family('process_cpu_seconds_total')?.type).toBe('COUNTER');
    expect(m.family('process_resident_memory_bytes')?.type).toBe('GAUGE');
    expect(
      m.value('orchd_http_requests_total', { route: '/v1/environments/:id', method: 'GET', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      m.value('orchd_http_requests_total', { route: 'unmatched', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    expect(m.value('orchd_http_requests_total', { route: '/v1/hosts', method: 'POST', status: '201' })).toBe(
      1,
    );
    expect(m.family('orchd_http_request_duration_seconds')?.type).toBe('HISTOGRAM');
    const labels = m.families.flatMap((f) => f.metrics.flatMap((s) => Object.values(s.labels ?? {})));
    expect(labels.some((v) => v.includes('env_doesnotexist1') || v.includes('at-all'))).toBe(false);
    expect(labels.some((v) => v.includes(MASTER) || v.includes(AGENT_TOKEN))).toBe(false);
  });

  test('a create moves the environment, placement and agent-call series; a snapshot its duration', async () => {
    const before = await scrape();
    const res = await orchd.request('POST', '/v1/environments', { ...as, body: validEnvironment() });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const id = (res.body as Environment).id;
    await waitForState(orchd, MASTER, id, 'running');
    const noFit = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: { ...validEnvironment(), spec: { ...validEnvironment().spec, image: 'no-such-image' } },
    });
    expect(noFit.status).toBe(400);
    const snap = await orchd.request('POST', `/v1/environments/${id}/snapshots`, { ...as, body: {} });
    expect(snap.status, JSON.stringify(snap.body)).toBe(201);

    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>) =>
      after.value(name, labels) - before.value(name, labels);
    expect(moved('orchd_environments_created_total', { origin: 'request' })).toBe(1);
    expect(moved('orchd_placements_total', { outcome: 'placed' })).toBe(1);
    expect(moved('orchd_placements_total', { outcome: 'never_fits' })).toBe(1);
    expect(after.value('orchd_environments', { state: 'running' })).toBe(1);
    expect(moved('orchd_agent_calls_total', { host: 'h1', outcome: 'ok' })).toBeGreaterThanOrEqual(2);
    expect(
      moved('orchd_snapshot_operations_total', { operation: 'create', kind: 'disk', outcome: 'ok' }),
    ).toBe(1);
    expect(after.family('orchd_snapshot_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(after.value('orchd_hosts', { kind: 'microvm', health: 'healthy' })).toBe(1);
    expect(after.value('orchd_reconciler_runs_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(1);

    // The VM vanishes from its agent: the reconciler's fix is counted.
    agent.vms.delete(id);
    await waitForState(orchd, MASTER, id, 'error');
    expect((await scrape()).value('orchd_reconciler_fixes_total', { action: 'vm_gone' })).toBe(1);
  });
});
