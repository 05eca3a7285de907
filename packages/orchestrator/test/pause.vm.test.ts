import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess, qemuAvailable, qemuPids } from '@orch/agent/testing';
import type { Environment } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

/** Every file under `dir` whose bytes contain `needle`. */
function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && statSync(p).size < 1024 * 2 ** 20 && readFileSync(p).includes(needle))
        hits.push(p);
    }
  };
  walk(dir);
  return hits;
}

/**
 * Pause and resume through `orch` and `orchd` with a real agent and QEMU (TCG), and environments
 * that outlive agent restarts: a counter in guest memory keeps counting, a /tmp file and the
 * per-VM secret stay, the exposed port answers after every resume and restart. One store (the
 * embedded one): the store paths are covered by pause.pg.test.ts.
 */
describe.skipIf(!qemuAvailable())('orch env pause|resume and agent restarts with real VMs', () => {
  describeStore('embedded')('on the embedded store', () => {
    let orchd: OrchdProcess;
    let agent: AgentProcess;
    let agentDir: string;
    let env: Environment;
    const config = mkdtempSync(join(tmpdir(), 'orch-pause-vm-cli-'));
    const orch = (...args: string[]) => orchCli(config, ...args);
    const MASTER = `m-${randomBytes(8).toString('hex')}`;

    const sh = async (script: string) => (await orch('exec', env.id, '--', 'sh', '-c', script)).stdout;
    const counter = async () => Number(await sh('cat /run/counter'));
    const counting = async (after: number) => {
      let now = await counter();
      while (now <= after) now = await counter();
      return now;
    };
    const get = async () =>
      JSON.parse((await orch('-o', 'json', 'env', 'get', env.id)).stdout) as Environment;
    const page = async (e: Environment) => {
      const url = e.ports.find((p) => p.as === 'web')!.url;
      for (let i = 0; ; i++) {
        const text = await fetch(url)
          .then((r) => r.text())
          .catch(() => '');
        if (text || i > 100) return text;
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const secretInGuest = () =>
      sh(
        "tr '\\0' '\\n' < /proc/$(pidof httpd | cut -d' ' -f1)/environ | grep '^ORCH_VM_SECRET=' | cut -d= -f2-",
      );
    const waitRunning = async () => {
      for (;;) {
        const e = await get();
        if (e.state === 'running' || e.state === 'error') return e;
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    pgTest.beforeAll(async ({ openStore, tempDir }) => {
      agentDir = AgentProcess.makeDataDir();
      agent = await AgentProcess.start({ dataDir: agentDir });
      orchd = await OrchdProcess.start({
        ...orchdStoreEnv(await openStore('embedded'), await tempDir('orchd-data-')),
        ORCH_AUTH_TOKEN: MASTER,
        MICROVM_AGENT_TOKEN: agent.token,
        ORCH_RECONCILE_INTERVAL_SEC: '1',
      });
      expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
      expect((await orch('host', 'register', '--url', agent.url, '--id', 'local')).stderr).toBe('');
      const up = await orch('-o', 'json', 'up', 'examples/hello');
      expect(up.code).toBe(0);
      env = JSON.parse(up.stdout) as Environment;
      expect(env.state).toBe('running');
      await sh(
        '(i=0; while :; do i=$((i+1)); echo $i > /run/counter.new; mv /run/counter.new /run/counter; sleep 0.1; done) >/dev/null 2>&1 & echo kept > /tmp/file',
      );
    });

    afterAll(async () => {
      await orchd?.stop();
      await agent?.stop('SIGKILL');
      if (agentDir) AgentProcess.removeDataDir(agentDir);
      rmSync(config, { recursive: true, force: true });
    });

    test('pause, resume, pause, resume: counter, /tmp file, secret and port survive; 409s', async () => {
      const secret = await secretInGuest();
      expect(secret.trim().length).toBeGreaterThan(20);
      for (let cycle = 0; cycle < 2; cycle++) {
        const c1 = await counting(0);
        const paused = await orch('-o', 'json', 'env', 'pause', env.id);
        expect(paused.stderr).toBe('');
        expect(JSON.parse(paused.stdout)).toMatchObject({ state: 'paused', expires_at: null });
        expect(qemuPids(agentDir)).toEqual([]);
        expect(filesContaining(agentDir, secret.trim())).toEqual([]);
        const twice = await orch('env', 'pause', env.id);
        expect(twice.code).not.toBe(0);
        expect(twice.stderr).toContain('is paused, not running');
        expect((await orch('env', 'list')).stdout).toMatch(new RegExp(`${env.id}\\s+paused`));

        const resumed = await orch('-o', 'json', 'env', 'resume', env.id);
        expect(resumed.stderr).toBe('');
        const r = JSON.parse(resumed.stdout) as Environment;
        expect(r).toMatchObject({ state: 'running', started_at: env.started_at });
        expect(await counting(c1)).toBeGreaterThan(c1);
        expect(await sh('cat /tmp/file')).toBe('kept\n');
        expect(await secretInGuest()).toBe(secret);
        expect(await page(r)).toMatch(/^hello from/);
        const again = await orch('env', 'resume', env.id);
        expect(again.code).not.toBe(0);
        expect(again.stderr).toContain('is running, not paused');
      }
    });

    test('a graceful agent restart: the environment stays running, its counter continues', async () => {
      const c1 = await counting(0);
      const port = agent.port;
      expect(await agent.stop('SIGTERM')).toBe(0);
      expect(qemuPids(agentDir)).toEqual([]);
      agent = await AgentProcess.start({
        dataDir: agentDir,
        token: agent.token,
        env: { AGENT_PORT: String(port) },
      });
      const e = await waitRunning();
      expect(e.state).toBe('running');
      expect(await counting(c1)).toBeGreaterThan(c1);
      expect(await sh('cat /tmp/file')).toBe('kept\n');
      // The record follows the VM (the reconciler): its expiry (the suspended time is added) and port.
      const vm = (await agent.request<{ expires_at: string }>('GET', `/v1/vms/${env.id}`)).body;
      await expect.poll(async () => (await get()).expires_at, { timeout: 30_000 }).toBe(vm.expires_at);
      await expect
        .poll(async () => (await page(await get())).startsWith('hello from'), { timeout: 30_000 })
        .toBe(true);
    });

    test('a SIGKILL of the agent: the VM keeps running, is re-adopted, and leaves nothing at delete', async () => {
      const c1 = await counting(0);
      const port = agent.port;
      const pids = qemuPids(agentDir);
      await agent.stop('SIGKILL');
      expect(qemuPids(agentDir)).toEqual(pids);
      agent = await AgentProcess.start({
        dataDir: agentDir,
        token: agent.token,
        env: { AGENT_PORT: String(port) },
      });
      expect((await waitRunning()).state).toBe('running');
      expect(await counting(c1)).toBeGreaterThan(c1);
      expect(await page(await get())).toMatch(/^hello from/);
      expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', env.id)).stdout).state).toBe('stopped');
      await expect.poll(() => qemuPids(agentDir).length, { timeout: 30_000 }).toBe(0);
    });
  });
});
