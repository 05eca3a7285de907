import { randomBytes } from 'node:crypto';
import type { Environment, HostDrain, Snapshot } from '@orch/protocol';
import { describeStores, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * The API of exports and drains against an agent double (the real transfers run in
 * travel.vm.test.ts): an export's status goes from the caller's verbatim value (or `pending`) to
 * the exporter's `ready` with `export_ref`, or `error` with `last_error`; bad destinations and
 * unknown snapshots get precise errors, never a 500; a drain with nowhere to go cordons the host
 * and lists each running environment with why; drain is master-only.
 */
describeStores('exports and drain on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  type Err = { error: { code: string; message: string } };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
    });
    agent = await FakeAgent.start(AGENT_TOKEN);
    const reg = await orchd.request('POST', '/v1/hosts', {
      ...as,
      body: { id: 'h1', kind: 'microvm', agent_url: agent.url, agent_token: AGENT_TOKEN },
    });
    expect(reg.status).toBe(201);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  const snapshotOf = async (): Promise<{ env: Environment; snap: Snapshot }> => {
    const created = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 't',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
        manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
        startup_script: 'true\n',
      },
    });
    const env = created.body as Environment;
    await expect
      .poll(
        async () =>
          ((await orchd.request('GET', `/v1/environments/${env.id}`, as)).body as Environment).state,
      )
      .toBe('running');
    const r = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
      ...as,
      body: { export_destination: 'file:///srv/exports', export_status: 'queued?' },
    });
    expect(r.status).toBe(201);
    return { env, snap: r.body as Snapshot };
  };
  const exportsOf = async (id: string) =>
    ((await orchd.request('GET', `/v1/snapshots/${id}`, as)).body as Snapshot).exports ?? [];

  test('export status: verbatim at create, then ready with export_ref; later exports; failures', async () => {
    const { snap } = await snapshotOf();
    expect(snap.exports).toMatchObject([{ destination: 'file:///srv/exports', status: 'queued?' }]);
    await expect.poll(async () => (await exportsOf(snap.id))[0]?.status).toBe('ready');
    expect(((await orchd.request('GET', `/v1/snapshots/${snap.id}`, as)).body as Snapshot).export_ref).toBe(
      `file:///srv/exports/${snap.id}`,
    );

    const later = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
      ...as,
      body: { destination: 's3://orch-bucket/team' },
    });
    expect(later.status).toBe(201);
    expect((later.body as Snapshot).exports?.[1]).toMatchObject({
      destination: 's3://orch-bucket/team',
      status: 'pending',
    });
    await expect.poll(async () => (await exportsOf(snap.id))[1]?.status).toBe('ready');

    agent.exportFailure = 'no space left on device';
    try {
      await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...as,
        body: { destination: 'file:///full' },
      });
      await expect.poll(async () => (await exportsOf(snap.id))[2]?.status).toBe('error');
      expect((await exportsOf(snap.id))[2]?.last_error).toMatch(/no space left on device/);
    } finally {
      agent.exportFailure = undefined;
    }
  });

  test('bad destinations and unknown snapshots: precise errors in the envelope, never a 500', async () => {
    const { env, snap } = await snapshotOf();
    for (const destination of [
      'http://x/y',
      'file://host/x',
      'file:///a/../b',
      's3://B/x',
      's3://u:p@bucket/x',
      '',
    ]) {
      const r = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...as,
        body: { destination },
      });
      expect(r.status, destination).toBe(400);
      expect((r.body as Err).error.code).toBe('invalid_argument');
      const c = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
        ...as,
        body: { export_destination: destination },
      });
      expect(c.status, destination).toBe(400);
    }
    const unknown = await orchd.request('POST', '/v1/snapshots/snap_nope/exports', {
      ...as,
      body: { destination: 'file:///x' },
    });
    expect(unknown.status).toBe(404);
    expect((unknown.body as Err).error.code).toBe('not_found');
    const traversal = await orchd.request('POST', '/v1/snapshots/..%2Fx/exports', {
      ...as,
      body: { destination: 'file:///x' },
    });
    expect(traversal.status).toBe(404);
  });

  test('a drain with nowhere to go cordons the host and lists each environment with why', async () => {
    const r = await orchd.request('POST', '/v1/hosts/h1?action=drain', as);
    expect(r.status).toBe(200);
    const drain = r.body as HostDrain;
    expect(drain.host).toMatchObject({ id: 'h1', state: 'cordoned' });
    expect(drain.moves).toEqual([]);
    expect(drain.unmovable.length).toBeGreaterThan(0);
    for (const u of drain.unmovable)
      expect(u).toMatchObject({ state: 'running', reason: 'no other host is registered' });
    expect((await orchd.request('GET', '/v1/moves?host_id=h1', as)).body).toEqual({ moves: [] });
    expect((await orchd.request('POST', '/v1/hosts/nope?action=drain', as)).status).toBe(404);
    expect((await orchd.request('GET', '/v1/moves?host_id=bad%20id', as)).status).toBe(400);
    if (store === 'server') {
      const key = await orchd.request('POST', '/v1/api-keys', { ...as, body: { label: 'drain' } });
      const secret = (key.body as { secret: string }).secret;
      const refused = await orchd.request('POST', '/v1/hosts/h1?action=drain', { token: secret });
      expect(refused.status).toBe(403);
    }
  });
});
