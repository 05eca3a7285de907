// A host drain end to end against agent doubles that speak the agent protocol (the real VMs are
// travel.vm.test.ts): a move that completes cleans up both hosts; one whose fetch fails rolls back
// to the source and leaves no artifact anywhere.
import { randomBytes } from 'node:crypto';
import type { Environment, HostDrain } from '@orch/protocol';
import { describeStores, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

describeStores('moves on the %s store', (store) => {
  let orchd: OrchdProcess;
  const agents: Record<string, FakeAgent> = {};
  const as = { token: MASTER };
  const register = async (id: string) =>
    orchd.request('POST', '/v1/hosts', {
      ...as,
      body: { id, kind: 'microvm', agent_url: agents[id]!.url, agent_token: `${AGENT_TOKEN}-${id}` },
    });
  const envOf = async (id: string) =>
    (await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment;
  type Move = { id: string; state: string; reason: string | null; artifact_id?: string };
  const settle = async (ids: string[]) => {
    for (let i = 0; i < 400; i++) {
      const all = ((await orchd.request('GET', '/v1/moves', as)).body as { moves: Move[] }).moves.filter(
        (m) => ids.includes(m.id),
      );
      if (all.length === ids.length && all.every((m) => ['done', 'rolled_back'].includes(m.state)))
        return all;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('moves never settled');
  };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
    });
    agents.h1 = await FakeAgent.start(`${AGENT_TOKEN}-h1`);
    // h2 has no image: a move resumes the environment's own disk, which needs none.
    agents.h2 = await FakeAgent.start(`${AGENT_TOKEN}-h2`, { images: [], image_details: [] });
    expect((await register('h1')).status).toBe(201);
  });

  afterAll(async () => {
    await orchd?.stop();
    for (const a of Object.values(agents)) await a.close();
  });

  test('a move is done; a move whose fetch fails rolls back', async () => {
    const created = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 't',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600, image: 'debian-12' },
        manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
        startup_script: 'true\n',
      },
    });
    const env = created.body as Environment;
    await expect.poll(async () => (await envOf(env.id)).state).toBe('running');
    expect((await register('h2')).status).toBe(201);

    const drain = (await orchd.request('POST', '/v1/hosts/h1?action=drain', as)).body as HostDrain;
    expect(drain.moves.map((m) => m.environment_id)).toEqual([env.id]);
    const [done] = await settle(drain.moves.map((m) => m.id));
    expect(done).toMatchObject({ state: 'done', reason: null });
    const moved = await envOf(env.id);
    expect(moved).toMatchObject({ state: 'running', host_id: 'h2' });
    expect(moved.last_move).toMatchObject({ from_host_id: 'h1', to_host_id: 'h2' });
    // The record keeps its image; the target was sent the moved artifact alone.
    expect(moved.spec.image).toBe('debian-12');
    const sent = agents.h2!.created.find((c) => c.id === env.id)!;
    expect(sent).toMatchObject({ restore_snapshot_id: expect.stringMatching(/^mva_/) });
    expect(sent.spec).toEqual({ cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 });
    expect(sent).not.toHaveProperty('seed_snapshot_id');
    // Paused and resumed in place on h2, which still has no image: its disk is there.
    for (const action of ['pause', 'resume']) {
      const r = await orchd.request('POST', `/v1/environments/${env.id}?action=${action}`, as);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    expect(await envOf(env.id)).toMatchObject({ state: 'running', host_id: 'h2' });
    // The source's VM and both artifacts go after `done` (best effort).
    await expect.poll(() => agents.h1!.vms.has(env.id)).toBe(false);
    expect(agents.h2!.vms.get(env.id)?.state).toBe('running');
    await expect.poll(() => [...agents.h1!.snapshots, ...agents.h2!.snapshots]).toEqual([]);

    // Back to h1, whose fetch from h2 fails: rolled back, running on h2 again.
    expect((await orchd.request('POST', '/v1/hosts/h1?action=uncordon', as)).status).toBe(200);
    agents.h1!.fetchFailures.agent = {
      status: 503,
      body: { error: { code: 'unavailable', message: 'fetch refused for the test' } },
    };
    const back = (await orchd.request('POST', '/v1/hosts/h2?action=drain', as)).body as HostDrain;
    expect(back.moves.map((m) => m.environment_id)).toEqual([env.id]);
    const [rolled] = await settle(back.moves.map((m) => m.id));
    expect(rolled?.state).toBe('rolled_back');
    expect(rolled?.reason).toContain('transferring:');
    expect(rolled?.reason).toContain('fetch refused for the test');
    const stayed = await envOf(env.id);
    expect(stayed).toMatchObject({ state: 'running', host_id: 'h2', last_error: null });
    expect(agents.h2!.vms.get(env.id)?.state).toBe('running');
    expect(agents.h1!.vms.has(env.id)).toBe(false);
    expect([...agents.h1!.snapshots]).toEqual([]);
    expect([...agents.h2!.snapshots]).toEqual([]);
  });
});
