import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Environment } from '@orch/protocol';
import { describeStores, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * Pause and resume through `orch` and `orchd` to an agent double (the QEMU agent's own VM test,
 * packages/agent/test/pause-resume.vm.test.ts, pauses and resumes real VMs): states, 409s, and
 * capacity (a paused environment holds no CPU or RAM, and a resume needs them back).
 */
describeStores('pause and resume on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const config = mkdtempSync(join(tmpdir(), 'orch-pause-cli-'));
  const orch = (...args: string[]) => orchCli(config, ...args);
  const as = { token: MASTER };
  const body = (task: string) => ({
    task_id: task,
    spec: { cpus: 2, ram_mb: 1024, storage_gb: 5, max_runtime_seconds: 3600 },
    manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
    startup_script: 'true\n',
    expose: [{ port: 8080, as: 'web' }],
  });
  const create = async (task: string) =>
    orchd.request('POST', '/v1/environments', { ...as, body: body(task) }) as Promise<{
      status: number;
      body: Environment & { error: { code: string; message: string } };
    }>;
  const running = async (id: string) => {
    for (;;) {
      const e = (await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment;
      if (e.state !== 'creating') return e;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const action = (id: string, act: string) =>
    orchd.request('POST', `/v1/environments/${id}?action=${act}`, as) as Promise<{
      status: number;
      body: Environment & { error: { code: string; message: string } };
    }>;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const opened = await openStore(store);
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(opened, await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
    });
    // Room for exactly one 2-CPU environment.
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN, {
      capacity: { cpus: 2, ram_mb: 2048, disk_gb: 100 },
      free: { cpus: 2, ram_mb: 2048, disk_gb: 100 },
    });
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
    rmSync(config, { recursive: true, force: true });
  });

  test('pause frees CPU and RAM for another environment; resume needs them back; 409 from the wrong state', async () => {
    const a = await running((await create('a')).body.id);
    expect(a.state).toBe('running');
    expect((await create('b')).status).toBe(503);

    const paused = await orch('-o', 'json', 'env', 'pause', a.id);
    expect(paused.stderr).toBe('');
    expect(JSON.parse(paused.stdout)).toMatchObject({
      id: a.id,
      state: 'paused',
      expires_at: null,
      ports: [],
    });
    expect(agent.vms.get(a.id)?.state).toBe('paused');
    const list = await orch('env', 'list');
    expect(list.stdout).toMatch(new RegExp(`${a.id}\\s+paused`));
    expect((await orch('env', 'get', a.id)).stdout).toContain('paused: resume with');

    const again = await action(a.id, 'pause');
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain('is paused, not running');
    const exec = await orchd.request('POST', `/v1/environments/${a.id}?action=exec`, {
      ...as,
      body: { argv: ['true'] },
    });
    expect(exec.status).toBe(409);

    // The paused environment's CPUs and RAM are free: b fits now, and a cannot resume meanwhile.
    const b = await running((await create('b')).body.id);
    expect(b.state).toBe('running');
    const noRoom = await action(a.id, 'resume');
    expect(noRoom.status).toBe(503);
    expect(noRoom.body.error.message).toContain('cannot resume');
    expect((await orchd.request('GET', `/v1/environments/${a.id}`, as)).body).toMatchObject({
      state: 'paused',
    });
    expect((await orch('env', 'rm', b.id)).code).toBe(0);

    const resumed = await orch('-o', 'json', 'env', 'resume', a.id);
    expect(resumed.stderr).toBe('');
    const r = JSON.parse(resumed.stdout) as Environment;
    expect(r).toMatchObject({ id: a.id, state: 'running', started_at: a.started_at });
    expect(r.ports.map((p) => p.host_port)).toEqual(agent.vms.get(a.id)!.ports.map((p) => p.host_port));
    // Paused time is not running time: the end moved later, by at most the time it was paused.
    expect(Date.parse(r.expires_at!)).toBeGreaterThan(Date.parse(a.expires_at!));
    const resumeRunning = await action(a.id, 'resume');
    expect(resumeRunning.status).toBe(409);
    expect(resumeRunning.body.error.message).toContain('is running, not paused');

    // A second cycle works as the first.
    expect((await action(a.id, 'pause')).body.state).toBe('paused');
    expect((await action(a.id, 'resume')).body.state).toBe('running');
    expect((await orch('-o', 'json', 'env', 'rm', a.id)).code).toBe(0);
    expect(agent.vms.has(a.id)).toBe(false);
  });

  test('a paused environment can be deleted; unknown ids are 404; a pause needs no body', async () => {
    const a = await running((await create('c')).body.id);
    expect((await action(a.id, 'pause')).status).toBe(200);
    const rm = await orch('-o', 'json', 'env', 'rm', a.id);
    expect(JSON.parse(rm.stdout).state).toBe('stopped');
    expect(agent.vms.has(a.id)).toBe(false);
    expect((await action('env_missing', 'pause')).status).toBe(404);
    expect((await action(a.id, 'bogus')).status).toBe(400);
  });
});
