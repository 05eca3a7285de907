import { randomBytes } from 'node:crypto';
import { type Environment, type Host, MIG_VM_REFUSAL } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { scrapeMetrics } from '@support/server/testing';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent } from './fake-agent.js';
import { gpuDevice, gpuStatus, migH100 } from './gpu-hosts.js';
import { waitForState } from './input-cases.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const GPU_TOKEN = `gpu-${randomBytes(8).toString('hex')}`;

/**
 * GPU hosts through orchd: the facts a GPU agent reports are stored per host and shown in
 * `GET /v1/hosts/{id}` and `/metrics`; a GPU environment is placed only where a matching GPU is
 * free, holds it while it runs and gives it back at stop; refusals say why. The agent is a test
 * double speaking the agent protocol (the real agent's detection is `packages/agent/test/gpu*.ts`).
 */
describeStore('embedded')('GPU hosts in orchd', () => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  const create = (gpu: { model: string; count: number; mig?: string }) =>
    orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 'gpu',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 600, gpu },
        manifest_inline: Buffer.from(
          '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
        ).toString('base64'),
        startup_script: 'nvidia-smi\n',
        secrets: {},
        expose: [],
      },
    });
  const message = (r: { body: unknown }) => (r.body as { error: { message: string } }).error.message;
  const host = async () => (await orchd.request('GET', '/v1/hosts/g1', as)).body as Host;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const env = orchdStoreEnv(await openStore('embedded'), await tempDir('orchd-gpu-'));
    orchd = await OrchdProcess.start({
      ...env,
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
      ORCH_HOST_HEALTH_INTERVAL_SEC: '1',
    });
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test('no GPU host: a GPU request is refused saying so', async () => {
    const r = await create({ model: 'h100', count: 1 });
    expect(r.status).toBe(400);
    expect(message(r)).toBe('no gpu host is registered');
  });

  test('a GPU host registers with its GPUs; orchd stores them and shows them', async () => {
    agent = await FakeAgent.start(GPU_TOKEN, {
      id: 'g1',
      kind: 'gpu',
      accelerator: 'kvm',
      gpus: [{ model: 'h100', count: 1, free: 1, mig_profiles: ['1g.10gb', '3g.40gb'] }],
      gpu_devices: [gpuDevice('0000:18:00.0'), migH100('0000:3b:00.0')],
      gpu_status: gpuStatus(),
    });
    const reg = await orchd.request('POST', '/v1/hosts', {
      ...as,
      body: { id: 'g1', kind: 'gpu', agent_url: agent.url, agent_token: GPU_TOKEN },
    });
    expect(reg.status).toBe(201);
    const h = await host();
    expect(h.health_detail).toBeNull();
    expect(h.gpu_status).toMatchObject({ state: 'ok', passthrough: { available: true } });
    expect(h.gpu_devices.map((d) => [d.pci_address, d.model, d.mig_mode, d.mig_instances.length])).toEqual([
      ['0000:18:00.0', 'h100', 'disabled', 0],
      ['0000:3b:00.0', 'h100', 'enabled', 7],
    ]);
  });

  test('placement: fits; no free GPU of that kind; model absent; MIG not offered; MIG refused for VMs; released at stop', async () => {
    const first = await create({ model: 'h100', count: 1 });
    expect(first.status).toBe(201);
    const env = first.body as Environment;
    expect(env.host_id).toBe('g1');
    expect(agent.created.find((c) => c.id === env.id)?.spec.gpu).toEqual({ model: 'h100', count: 1 });
    await waitForState(orchd, MASTER, env.id, 'running');

    const second = await create({ model: 'h100', count: 1 });
    expect(second.status).toBe(503);
    expect(message(second)).toBe('no host can take this environment now: g1: 0 of 1 h100 GPUs free');
    const l40s = await create({ model: 'l40s', count: 1 });
    expect(l40s.status).toBe(400);
    expect(message(l40s)).toBe(
      'no registered gpu host could ever run this: g1: no l40s GPU (it has 2x h100)',
    );
    const notOffered = await create({ model: 'h100', count: 1, mig: '7g.80gb' });
    expect(message(notOffered)).toBe(
      'no registered gpu host could ever run this: g1: MIG profile 7g.80gb is not offered by its h100 GPUs (offered: 1g.10gb, 3g.40gb)',
    );
    const mig = await create({ model: 'h100', count: 1, mig: '1g.10gb' });
    expect(mig.status).toBe(400);
    expect(message(mig)).toBe(`no registered gpu host could ever run this: g1: ${MIG_VM_REFUSAL}`);

    // Stop: the GPU is free again and the next request takes it.
    expect((await orchd.request('DELETE', `/v1/environments/${env.id}`, as)).status).toBe(200);
    await waitForState(orchd, MASTER, env.id, 'stopped');
    const again = await create({ model: 'h100', count: 1 });
    expect(again.status).toBe(201);
    await orchd.request('DELETE', `/v1/environments/${(again.body as Environment).id}`, as);
  });

  test('/metrics: GPUs per host, model, MIG mode and held; MIG instances; detection state', async () => {
    const m = await scrapeMetrics(`${orchd.url}/metrics`, { authorization: `Bearer ${MASTER}` });
    expect(
      m.value('orchd_host_gpus', { host: 'g1', model: 'h100', mig_mode: 'disabled', held: 'false' }),
    ).toBe(1);
    expect(
      m.value('orchd_host_gpus', { host: 'g1', model: 'h100', mig_mode: 'enabled', held: 'false' }),
    ).toBe(1);
    expect(m.value('orchd_host_gpu_mig_instances', { host: 'g1', model: 'h100', profile: '1g.10gb' })).toBe(
      7,
    );
    expect(m.value('orchd_host_gpu_detection', { host: 'g1', state: 'ok', passthrough: 'true' })).toBe(1);
  });

  test('a driver that goes missing is a health detail at the next check, and placement says why it waits', async () => {
    agent.info = {
      ...agent.info,
      gpus: [],
      gpu_devices: [],
      gpu_status: gpuStatus({
        state: 'no_driver',
        detail:
          "NVIDIA driver not loaded (nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.)",
      }),
    };
    let h = await host();
    for (let i = 0; i < 100 && h.gpu_status?.state !== 'no_driver'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      h = await host();
    }
    expect(h.health).toBe('healthy');
    expect(h.health_detail).toMatch(/^GPU detection: NVIDIA driver not loaded \(nvidia-smi exit 9/);
    expect(h.gpu_devices).toEqual([]);
    const r = await create({ model: 'h100', count: 1 });
    expect(r.status).toBe(503);
    expect(message(r)).toMatch(
      /^no host can take this environment now: g1: GPU detection failed: NVIDIA driver not loaded/,
    );
  });
});
