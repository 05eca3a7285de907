import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentInfo, AgentVm } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, qemuAvailable, qemuPids, vmRequest } from './agent-process.js';

const hasQemu = qemuAvailable();

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

const SECRET = `pause-secret-${Date.now()}-value`;
/** A counter kept in a shell variable (memory) and written to /run/counter; a web server on 8080. */
const STARTUP = [
  'printf %s "$API_TOKEN" > /run/secret-copy',
  'mkdir -p /tmp/www && echo hello-from-guest > /tmp/www/index.html && httpd -p 8080 -h /tmp/www',
  '(i=0; while :; do i=$((i+1)); echo $i > /run/counter.new; mv /run/counter.new /run/counter; sleep 0.1; done) >/dev/null 2>&1 &',
  '',
].join('\n');

describe.skipIf(!hasQemu)('orch-agent pause and resume in place; VMs survive an agent restart', () => {
  let dataDir: string;
  let agent: AgentProcess;
  const id = 'vm-pause';

  const counter = async () => Number((await agent.exec(id, ['cat', '/run/counter'])).stdout);
  /** The counter keeps counting: a later read is larger. */
  const counting = async (after: number) => {
    let now = await counter();
    while (now <= after) now = await counter();
    return now;
  };
  const web = async (vm: AgentVm) => {
    const port = vm.ports.find((p) => p.as === 'web')!;
    for (let i = 0; ; i++) {
      const body = await fetch(`http://${vm.host_address}:${port.host_port}/index.html`)
        .then((r) => (r.ok ? r.text() : ''))
        .catch(() => '');
      if (body || i > 100) return body;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  beforeAll(async () => {
    dataDir = AgentProcess.makeDataDir();
    agent = await AgentProcess.start({ dataDir });
    const created = await agent.request<AgentVm>(
      'POST',
      '/v1/vms',
      vmRequest(
        id,
        { startup_script: STARTUP, secrets: { API_TOKEN: SECRET }, expose: [{ port: 8080, as: 'web' }] },
        { max_runtime_seconds: 3600 },
      ),
    );
    expect(created.status).toBe(202);
    expect((await agent.waitVm(id)).state).toBe('running');
    await agent.exec(id, ['sh', '-c', 'echo kept > /tmp/file']);
  }, 600_000);

  afterAll(async () => {
    await agent?.stop('SIGKILL');
    if (dataDir) AgentProcess.removeDataDir(dataDir);
  });

  test('pause, resume, pause, resume: counter, /tmp file, secret and exposed port survive; paused holds no QEMU, CPU or RAM', async () => {
    let pausedAtMost = 0;
    for (let cycle = 0; cycle < 2; cycle++) {
      const before = await agent.request<AgentVm>('GET', `/v1/vms/${id}`);
      const c1 = await counting(0);
      const pauseSent = Date.now();
      const paused = await agent.request<AgentVm>('POST', `/v1/vms/${id}/pause`);
      const pauseReturned = Date.now();
      expect(paused.status).toBe(200);
      expect(paused.body.state).toBe('paused');
      expect(paused.body.expires_at).toBeNull();
      expect(paused.body.ports).toEqual([]);
      expect(qemuPids(dataDir)).toEqual([]);
      const info = (await agent.request<AgentInfo>('GET', '/v1/info')).body;
      expect(info.free.cpus).toBe(info.capacity.cpus);
      expect(info.free.ram_mb).toBe(info.capacity.ram_mb);
      // The saved memory holds the secret; it is on disk encrypted only.
      expect(filesContaining(dataDir, SECRET)).toEqual([]);
      const again = await agent.request<{ error: { code: string } }>('POST', `/v1/vms/${id}/pause`);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('conflict');
      expect((await agent.request('POST', `/v1/vms/${id}/exec`, { argv: ['true'] })).status).toBe(409);

      const resumeSent = Date.now();
      const resumed = await agent.request<AgentVm>('POST', `/v1/vms/${id}/resume`);
      const resumedAt = Date.now();
      expect(resumed.status).toBe(200);
      expect(resumed.body.state).toBe('running');
      expect(resumed.body.started_at).toBe(before.body.started_at);
      // Max runtime counts running time since the first start: the paused time is added to the
      // end, and the time run before the pause is not given back.
      const expires = Date.parse(resumed.body.expires_at!);
      expect(expires).toBeGreaterThanOrEqual(
        Date.parse(before.body.expires_at!) + (resumeSent - pauseReturned),
      );
      expect(expires).toBeLessThanOrEqual(
        resumedAt + 3600_000 - (pauseSent - Date.parse(before.body.started_at!) - pausedAtMost),
      );
      pausedAtMost += resumedAt - pauseSent;
      const c2 = await counting(c1);
      expect(c2).toBeGreaterThan(c1);
      expect((await agent.exec(id, ['cat', '/tmp/file'])).stdout).toBe('kept\n');
      expect((await agent.exec(id, ['cat', '/run/secret-copy'])).stdout).toBe(SECRET);
      expect(await web(resumed.body)).toBe('hello-from-guest\n');
      const resumeRunning = await agent.request<{ error: { code: string } }>('POST', `/v1/vms/${id}/resume`);
      expect(resumeRunning.status).toBe(409);
      expect(resumeRunning.body.error.code).toBe('conflict');
    }
    expect(agent.output.join('\n')).not.toContain(SECRET);
  });

  test('max runtime counts running time from the first start: the paused time is added, a resume does not reset it', async () => {
    const short = 'vm-short';
    const max = 12;
    expect(
      (await agent.request('POST', '/v1/vms', vmRequest(short, {}, { max_runtime_seconds: max }))).status,
    ).toBe(202);
    const vm = await agent.waitVm(short);
    const started = Date.parse(vm.started_at!);
    await new Promise((r) => setTimeout(r, 3000));
    const pauseSent = Date.now();
    expect((await agent.request('POST', `/v1/vms/${short}/pause`)).status).toBe(200);
    const pauseReturned = Date.now();
    await new Promise((r) => setTimeout(r, 4000));
    const resumeSent = Date.now();
    const resumed = await agent.request<AgentVm>('POST', `/v1/vms/${short}/resume`);
    const resumedAt = Date.now();
    expect(resumed.body.state).toBe('running');
    // It had run at least pauseSent - started before the pause: that is not given back.
    expect(Date.parse(resumed.body.expires_at!)).toBeLessThanOrEqual(
      resumedAt + max * 1000 - (pauseSent - started),
    );
    const stopped = await agent.waitVm(short, ['stopped', 'error']);
    const seen = Date.now();
    expect(stopped.state).toBe('stopped');
    expect(stopped.error).toContain('max_runtime_seconds');
    // It stopped no earlier than max runtime of running time: the paused time was added.
    expect(seen).toBeGreaterThanOrEqual(started + max * 1000 + (resumeSent - pauseReturned));
    expect((await agent.request('DELETE', `/v1/vms/${short}`)).status).toBe(204);
  });

  test('a graceful agent restart suspends the VM and resumes it at start; the counter keeps counting', async () => {
    const c1 = await counting(0);
    expect(await agent.stop('SIGTERM')).toBe(0);
    expect(qemuPids(dataDir)).toEqual([]);
    expect(filesContaining(dataDir, SECRET)).toEqual([]);
    agent = await AgentProcess.start({ dataDir, token: agent.token });
    const vm = await agent.waitVm(id, ['running', 'error']);
    expect(vm.error).toBeNull();
    expect(vm.state).toBe('running');
    expect(await counting(c1)).toBeGreaterThan(c1);
    expect((await agent.exec(id, ['cat', '/tmp/file'])).stdout).toBe('kept\n');
    expect(await web(vm)).toBe('hello-from-guest\n');
  });

  test('after a SIGKILL of the agent the VM keeps running and is re-adopted; nothing leaks at delete', async () => {
    const c1 = await counting(0);
    const pids = qemuPids(dataDir);
    expect(pids).toHaveLength(1);
    await agent.stop('SIGKILL');
    expect(qemuPids(dataDir)).toEqual(pids);
    agent = await AgentProcess.start({ dataDir, token: agent.token });
    const vm = await agent.waitVm(id, ['running', 'error']);
    expect(vm.error).toBeNull();
    expect(vm.state).toBe('running');
    expect(await counting(c1)).toBeGreaterThan(c1);
    expect(await web(vm)).toBe('hello-from-guest\n');
    // Paused and resumed by the new agent as well.
    expect((await agent.request('POST', `/v1/vms/${id}/pause`)).status).toBe(200);
    const resumed = await agent.request<AgentVm>('POST', `/v1/vms/${id}/resume`);
    expect(resumed.body.state).toBe('running');
    expect(await web(resumed.body)).toBe('hello-from-guest\n');
    const port = resumed.body.ports[0]!.host_port;
    expect((await agent.request('DELETE', `/v1/vms/${id}`)).status).toBe(204);
    expect(qemuPids(dataDir)).toEqual([]);
    const stillServing = await fetch(`http://127.0.0.1:${port}/`).then(
      () => true,
      () => false,
    );
    expect(stillServing).toBe(false);
  });
});
