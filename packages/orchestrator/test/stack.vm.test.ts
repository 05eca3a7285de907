import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess, qemuAvailable, qemuPids } from '@orch/agent/testing';
import type { Environment, Snapshot } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

/**
 * The whole orchestrator path with a real host agent and real QEMU microVMs (TCG), once, on the
 * server store (the embedded one is the VM suites' pause.vm.test.ts and `npm start`'s; stores are
 * compared by the suites against the test agent, so the slow VM path runs once, not per store):
 * `orch up` on the shipped `debian-12` example (examples/python), `orch exec`, the exposed port, a
 * disk and a live snapshot, a restore of each (the snapshot alone boots; the record keeps the
 * image), and deleting everything leaves no VM behind.
 */
describe.skipIf(!qemuAvailable())('orch, orchd and orch-agent with real VMs', () => {
  describeStore('server')('on the server store', () => {
    const store = 'server';
    let orchd: OrchdProcess;
    let agent: AgentProcess;
    let agentDir: string;
    const config = mkdtempSync(join(tmpdir(), 'orch-stack-cli-'));
    const orch = (...args: string[]) => orchCli(config, ...args);
    const MASTER = `m-${randomBytes(8).toString('hex')}`;

    pgTest.beforeAll(async ({ openStore, tempDir }) => {
      agentDir = AgentProcess.makeDataDir();
      agent = await AgentProcess.start({ dataDir: agentDir });
      const env = orchdStoreEnv(await openStore(store), await tempDir('orchd-data-'));
      orchd = await OrchdProcess.start({
        ...env,
        ORCH_AUTH_TOKEN: MASTER,
        MICROVM_AGENT_TOKEN: agent.token,
        ORCH_RECONCILE_INTERVAL_SEC: '2',
      });
      expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
      const reg = await orch('host', 'register', '--url', agent.url, '--id', 'local');
      expect(reg.stderr).toBe('');
    });

    afterAll(async () => {
      await orchd?.stop();
      await agent?.stop();
      if (agentDir) AgentProcess.removeDataDir(agentDir);
      rmSync(config, { recursive: true, force: true });
    });

    test('up, exec, expose, snapshot disk and live, restore each, delete everything', async () => {
      const up = await orch('-o', 'json', 'up', 'examples/python');
      expect(up.stderr.replace(/\r?env_\S+: creating[^\n]*\n?/g, '')).toBe('');
      expect(up.code).toBe(0);
      const env = JSON.parse(up.stdout) as Environment;
      expect(env).toMatchObject({
        state: 'running',
        host_id: 'local',
        task_id: 'python',
        spec: { cpus: 1, ram_mb: 512, storage_gb: 2, image: 'debian-12' },
      });

      // exec: the command really runs in the guest.
      expect(await orch('exec', env.id, '--', 'echo', 'hi')).toEqual({
        code: 0,
        stdout: 'hi\n',
        stderr: '',
      });
      const fails = await orch('exec', env.id, '--', 'sh', '-c', 'echo oops >&2; exit 3');
      expect(fails).toEqual({ code: 3, stdout: '', stderr: 'oops\n' });
      expect((await orch('exec', env.id, '--', 'nproc')).stdout).toBe('1\n');

      // The startup script serves Python's answer through the exposed port.
      const port = env.ports.find((p) => p.as === 'api')!;
      await expect
        .poll(
          async () =>
            (
              await fetch(port.url)
                .then((r) => r.text())
                .catch(() => '')
            ).includes('"answer": 42'),
          { timeout: 60_000 },
        )
        .toBe(true);

      // The startup log, read from the guest through the agent: the server logged that request.
      await expect
        .poll(async () => (await orch('logs', env.id)).stdout, { timeout: 30_000 })
        .toMatch(/"GET \/ HTTP\/1\.1" 200 -\n$/);
      const last = (await orch('logs', env.id)).stdout.split('\n').at(-2)!;
      expect((await orch('logs', env.id, '--tail', String(last.length + 1))).stdout).toBe(`${last}\n`);

      // A marker on the root disk, and a counter in memory (a background loop), before the snapshots.
      expect((await orch('exec', env.id, '--', 'sh', '-c', 'echo kept > /workspace/marker')).code).toBe(0);
      expect(
        (
          await orch(
            'exec',
            env.id,
            '--',
            'sh',
            '-c',
            '(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &',
          )
        ).code,
      ).toBe(0);
      await new Promise((r) => setTimeout(r, 2500));

      const diskRun = await orch('-o', 'json', 'snapshot', 'create', env.id);
      expect(diskRun.stderr).toBe('');
      const disk = JSON.parse(diskRun.stdout) as Snapshot;
      expect(disk).toMatchObject({ kind: 'disk', state: 'ready', arch: 'amd64' });
      expect(disk.digest).toMatch(/^[0-9a-f]{64}$/);
      const live = JSON.parse(
        (await orch('-o', 'json', 'snapshot', 'create', env.id, '--live')).stdout,
      ) as Snapshot;
      expect(live).toMatchObject({ kind: 'live', state: 'ready' });
      expect((await orchd.request('GET', `/v1/snapshots/${live.id}`, { token: MASTER })).body).toEqual(
        JSON.parse((await orch('-o', 'json', 'snapshot', 'get', live.id)).stdout),
      );

      // Disk restore: a cold boot with the file kept, recorded as debian-12.
      const coldRun = await orch('-o', 'json', 'snapshot', 'restore', disk.id);
      expect(coldRun.stderr).toBe('');
      const cold = JSON.parse(coldRun.stdout) as Environment;
      expect(cold).toMatchObject({
        state: 'running',
        restored_from_snapshot_id: disk.id,
        spec: { image: 'debian-12' },
      });
      expect((await orch('exec', cold.id, '--', 'python3', '-c', 'print(6 * 7)')).stdout).toBe('42\n');
      expect((await orch('exec', cold.id, '--', 'cat', '/workspace/marker')).stdout).toBe('kept\n');

      // Live restore: the guest resumes; the counter keeps counting from where it was. (The host
      // has as many cpus as this machine, 2: free the cold one's first.)
      const before = Number((await orch('exec', env.id, '--', 'cat', '/tmp/counter')).stdout);
      expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', cold.id)).stdout).state).toBe('stopped');
      const restore = await orch('-o', 'json', 'snapshot', 'restore', live.id);
      expect(restore.code, restore.stderr).toBe(0);
      const warm = JSON.parse(restore.stdout) as Environment;
      expect(warm).toMatchObject({
        state: 'running',
        restored_from_snapshot_id: live.id,
        spec: { image: 'debian-12' },
      });
      const first = Number((await orch('exec', warm.id, '--', 'cat', '/tmp/counter')).stdout);
      expect(first).toBeGreaterThan(0);
      await expect
        .poll(async () => Number((await orch('exec', warm.id, '--', 'cat', '/tmp/counter')).stdout), {
          timeout: 30_000,
        })
        .toBeGreaterThan(first);
      expect(before).toBeGreaterThan(0);

      // Delete everything: environments stopped, snapshots gone, no QEMU left for this agent.
      for (const e of [env, warm])
        expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', e.id)).stdout).state).toBe('stopped');
      for (const s of [disk, live]) expect((await orch('snapshot', 'rm', s.id)).code).toBe(0);
      await expect.poll(() => qemuPids(agentDir).length, { timeout: 30_000 }).toBe(0);
      expect(JSON.parse((await orch('-o', 'json', 'snapshot', 'list')).stdout).snapshots).toEqual([]);
    });
  });
});
