import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AgentProcess,
  buildServiceImage,
  filesContaining,
  importImage,
  qemuAvailable,
  qemuPids,
} from '@orch/agent/testing';
import type { Environment, ServiceStatus, Snapshot } from '@orch/protocol';
import { pgTest } from '@support/pg/testing';
import { afterAll, describe, expect } from 'vitest';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

/**
 * Manifest services for real (issue 14): orchd, orch-agent and QEMU under TCG, with an OCI image
 * this test builds offline (a static busybox httpd, service-fixtures.ts of the agent). Lean on
 * purpose: one environment with three services (two serving, one crashing) checked for everything
 * a user relies on, one live restore of it and one disk restore; the refusal boots nothing. One
 * store (embedded): the store is not what is under test here.
 */
describe.skipIf(!qemuAvailable())('manifest services in real VMs', () => {
  let orchd: OrchdProcess;
  let agent: AgentProcess;
  let agentDir: string;
  const work = mkdtempSync(join(tmpdir(), 'orch-services-'));
  const config = join(work, 'cli');
  const orch = (...args: string[]) => orchCli(config, ...args);
  const MASTER = `m-${randomBytes(8).toString('hex')}`;
  const SECRET = `svc-secret-${randomBytes(9).toString('hex')}`;
  const envOf = async (id: string) =>
    JSON.parse((await orch('-o', 'json', 'env', 'get', id)).stdout) as Environment;
  const service = (env: Environment, name: string) =>
    env.services.find((s) => s.name === name) as ServiceStatus;
  const exec = async (id: string, script: string) => orch('exec', id, '--', 'sh', '-c', script);

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    agentDir = AgentProcess.makeDataDir();
    importImage(agentDir, 'websvc', `oci-archive:${buildServiceImage(work)}`);
    agent = await AgentProcess.start({ dataDir: agentDir });
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore('embedded'), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      MICROVM_AGENT_TOKEN: agent.token,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
    });
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
    expect((await orch('host', 'register', '--url', agent.url, '--id', 'local')).stderr).toBe('');
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.stop();
    if (agentDir) AgentProcess.removeDataDir(agentDir);
    rmSync(work, { recursive: true, force: true });
  });

  const definition = (name: string, body: string) => {
    const path = join(work, `${name}.yaml`);
    writeFileSync(path, body);
    return path;
  };

  pgTest('a service image on no host is a 400 naming image and service, and nothing boots', async () => {
    const file = definition(
      'ghost',
      'version: 1\nservices:\n  web:\n    image: websvc\n  cache:\n    image: registry.local/redis:7\n',
    );
    const up = await orch('up', '-f', file);
    expect(up.code).not.toBe(0);
    expect(up.stderr).toContain(
      'service "cache": image "registry.local/redis:7" (image name redis-7) is on no',
    );
    const compiled = JSON.parse((await orch('compile', '-f', file, '--format', 'json')).stdout);
    const { required_secrets: _r, ...body } = compiled;
    const r = await orchd.request('POST', '/v1/environments', { token: MASTER, body });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({
      error: { code: 'invalid_argument', message: expect.stringContaining('cache') },
    });
    expect((await agent.request<{ vms: unknown[] }>('GET', '/v1/vms')).body.vms).toEqual([]);
    expect(qemuPids(agentDir)).toEqual([]);
  });

  pgTest(
    'services run in the VM: env, secrets, localhost, expose, restarts, failed, logs, live and disk restores',
    async () => {
      const file = definition(
        'svc',
        [
          'version: 1',
          'resources: { cpus: 1, memory: 256MiB, disk: 1GiB }',
          'run:',
          // The services start before these lines; the script waits for their ports.
          '  - orch-wait-port 8080 300 && orch-wait-port 8081 300',
          '  - wget -qO- http://localhost:8081/index.html > /workspace/from-api',
          '  - echo workspace reached the services',
          'services:',
          '  web:',
          '    image: websvc',
          '    ports: [8080]',
          '    env:',
          '      NAME: web',
          '      GREETING: literal-wins',
          '      API_TOKEN: { secret: api_token }',
          '  api:',
          '    image: websvc',
          '    ports: [8081]',
          '    env: { NAME: api, PORT: "8081" }',
          '  crash:',
          '    image: websvc',
          '    env: { NAME: crash, CRASH: "1" }',
          'expose:',
          '  - { port: 8080, as: web }',
          '',
        ].join('\n'),
      );
      const up = await orch('-o', 'json', 'up', '-f', file, '--secret', `api_token=${SECRET}`);
      expect(up.code, up.stderr).toBe(0);
      const env = JSON.parse(up.stdout) as Environment;
      expect(env.state).toBe('running');
      expect(env.services.map((s) => [s.name, s.image, s.ports])).toEqual([
        ['web', 'websvc', [8080]],
        ['api', 'websvc', [8081]],
        ['crash', 'websvc', []],
      ]);

      // Exposed and fetched from the host: the image's User, WorkingDir and Env, overridden by the
      // manifest's literal, then the secret.
      const url = `${env.ports.find((p) => p.as === 'web')!.url}/cgi-bin/info`;
      const info = async (u: string) =>
        fetch(u)
          .then((r) => r.text())
          .catch(() => '');
      await expect
        .poll(() => info(url), { timeout: 300_000, interval: 1000 })
        .toBe(`name=web greeting=literal-wins token=${SECRET} uid=100\n`);
      // The workspace reached a service at localhost (after waiting for its port), and the second
      // service runs beside the first, without the secret it does not reference.
      await expect
        .poll(async () => (await exec(env.id, 'cat /workspace/from-api')).stdout, { timeout: 120_000 })
        .toBe('index\n');
      expect((await exec(env.id, 'wget -qO- http://localhost:8081/cgi-bin/info')).stdout).toBe(
        'name=api greeting=from-image token= uid=100\n',
      );

      // The crashing service ends `failed` (not restarted forever); the environment stays up.
      await expect
        .poll(async () => service(await envOf(env.id), 'crash'), { timeout: 180_000, interval: 1000 })
        .toMatchObject({ state: 'failed', exit_code: 3, restarts: 4 });
      const shown = await envOf(env.id);
      expect(shown.state).toBe('running');
      expect(service(shown, 'web')).toMatchObject({ state: 'running', restarts: 0 });
      const text = (await orch('env', 'get', env.id)).stdout;
      expect(text).toMatch(/crash\s+failed\s+websvc\s+restarts 4\s+last exit 3/);

      // Killing the service's process in the guest: restarted, counted, serving again.
      const kill = await exec(
        env.id,
        "kill -9 $(ps -o pid,args | awk '/httpd -f -p 8080/ && !/awk/ {print $1}')",
      );
      expect(kill.code, kill.stderr).toBe(0);
      await expect
        .poll(async () => service(await envOf(env.id), 'web'), { timeout: 120_000, interval: 1000 })
        .toMatchObject({ state: 'running', restarts: 1, exit_code: 137 });
      await expect.poll(() => info(url), { timeout: 120_000 }).toContain('name=web');

      // Logs: per service through the CLI and the API (window and follow); the startup log by default.
      const webLog = (await orch('logs', env.id, 'web')).stdout;
      expect(webLog).toContain('service web starting as uid 100 in /www');
      expect(webLog).toContain('[orch] service web: exited with status 137; restarting in 1 s');
      const crashLog = await orchd.request('GET', `/v1/environments/${env.id}/logs?service=crash`, {
        token: MASTER,
      });
      expect(crashLog.status).toBe(200);
      expect(crashLog.body).toContain('service crash crashing');
      expect(crashLog.body).toContain('5 quick exits in a row: failed, not restarted');
      const tail = await orchd.request('GET', `/v1/environments/${env.id}/logs?service=crash&tail=20`, {
        token: MASTER,
      });
      expect(String(tail.body).length).toBe(20);
      expect(Number(tail.headers.get('x-log-offset')) + 20).toBe(Number(tail.headers.get('x-log-size')));
      const follow = new AbortController();
      const res = await fetch(`${orchd.url}/v1/environments/${env.id}/logs?service=api&follow=true`, {
        headers: { authorization: `Bearer ${MASTER}` },
        signal: follow.signal,
      });
      const first = await res.body!.getReader().read();
      follow.abort();
      expect(Buffer.from(first.value!).toString()).toContain('service api starting as uid 100 in /www');
      expect((await orch('logs', env.id)).stdout).toContain('workspace reached the services');
      const unknown = await orchd.request('GET', `/v1/environments/${env.id}/logs?service=nope`, {
        token: MASTER,
      });
      expect(unknown.status).toBe(404);
      const bad = await orchd.request('GET', `/v1/environments/${env.id}/logs?service=..%2Fx`, {
        token: MASTER,
      });
      expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_argument' } } });

      // The secret is in guest memory only: no file under the agent's data dir, no log line.
      expect(filesContaining(agentDir, SECRET)).toEqual([]);
      expect(agent.output.join('\n')).not.toContain(SECRET);
      expect(orchd.output.join('\n')).not.toContain(SECRET);
      expect(webLog).not.toContain(SECRET);

      // A live snapshot and its restore: the services continue where they were, still answering.
      const live = JSON.parse(
        (await orch('-o', 'json', 'snapshot', 'create', env.id, '--live')).stdout,
      ) as Snapshot;
      expect(live).toMatchObject({ kind: 'live', state: 'ready' });
      expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', env.id)).stdout).state).toBe('stopped');
      const restore = await orch('-o', 'json', 'snapshot', 'restore', live.id);
      expect(restore.code, restore.stderr).toBe(0);
      const warm = JSON.parse(restore.stdout) as Environment;
      const warmUrl = `${warm.ports.find((p) => p.as === 'web')!.url}/cgi-bin/info`;
      expect(await info(warmUrl)).toBe(`name=web greeting=literal-wins token=${SECRET} uid=100\n`);
      await expect
        .poll(async () => (await envOf(warm.id)).services.map((s) => [s.name, s.state, s.restarts]), {
          timeout: 60_000,
        })
        .toEqual([
          ['web', 'running', 1],
          ['api', 'running', 0],
          ['crash', 'failed', 4],
        ]);

      // A disk snapshot cold-boots: the services start again (restarts from 0), serving.
      const disk = JSON.parse((await orch('-o', 'json', 'snapshot', 'create', warm.id)).stdout) as Snapshot;
      expect(disk).toMatchObject({ kind: 'disk', state: 'ready' });
      expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', warm.id)).stdout).state).toBe('stopped');
      const coldUp = await orch('-o', 'json', 'snapshot', 'restore', disk.id);
      expect(coldUp.code, coldUp.stderr).toBe(0);
      const cold = JSON.parse(coldUp.stdout) as Environment;
      const coldUrl = `${cold.ports.find((p) => p.as === 'web')!.url}/cgi-bin/info`;
      await expect.poll(() => info(coldUrl), { timeout: 300_000, interval: 1000 }).toContain('name=web');
      await expect
        .poll(async () => service(await envOf(cold.id), 'web'), { timeout: 60_000 })
        .toMatchObject({ state: 'running', restarts: 0 });

      expect(JSON.parse((await orch('-o', 'json', 'env', 'rm', cold.id)).stdout).state).toBe('stopped');
      for (const s of [live, disk]) expect((await orch('snapshot', 'rm', s.id)).code).toBe(0);
      await expect.poll(() => qemuPids(agentDir).length, { timeout: 30_000 }).toBe(0);
    },
    1_200_000,
  );
});
