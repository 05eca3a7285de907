import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess, qemuAvailable } from '@orch/agent/testing';
import type { Build, Environment, Snapshot } from '@orch/protocol';
import { describeOnServerPostgres, pgTest } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { buildThenRunSteps, masked } from './readme-flow.js';
import { orchCli } from './run-cli.js';

/**
 * Build layers with a real agent and real QEMU microVMs (TCG), `busybox` guests, and the CLI
 * README's build-then-run example on `debian-12` (examples/build): one orchd and one agent for the
 * whole file (a second orchd on the same database for the stable-keys case).
 */
describe.skipIf(!qemuAvailable())('orch build with real VMs', () => {
  describeOnServerPostgres('on the server store', () => {
    let orchd: OrchdProcess;
    let agent: AgentProcess;
    let agentDir: string;
    const config = mkdtempSync(join(tmpdir(), 'orch-build-cli-'));
    const defs = mkdtempSync(join(tmpdir(), 'orch-build-defs-'));
    const orch = (...args: string[]) => orchCli(config, ...args);
    const MASTER = `m-${randomBytes(8).toString('hex')}`;
    const as = { token: MASTER };

    /** Writes `<defs>/<name>/orch.yaml` (busybox, small) and returns its directory. */
    const definition = (name: string, setup: string[], extra = ''): string => {
      const dir = join(defs, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, 'orch.yaml'),
        [
          'version: 1',
          'resources: { cpus: 1, memory: 256MiB, disk: 1GiB, max_runtime: 15m }',
          'setup:',
          ...setup.map((l) => `  - ${JSON.stringify(l)}`),
          'run:',
          '  - echo ran >> /workspace/runlog',
          extra,
        ].join('\n'),
      );
      return dir;
    };
    const buildJson = async (...args: string[]) => {
      const r = await orch('-o', 'json', 'build', ...args);
      return { ...r, build: r.stdout ? (JSON.parse(r.stdout) as Build) : undefined };
    };
    const snapshot = async (id: string) =>
      (await orchd.request('GET', `/v1/snapshots/${id}`, as)).body as Snapshot;
    /** Boots counted by the agent (every mode): a build that boots nothing leaves it unchanged. */
    const agentBoots = async () => {
      const text = (await agent.request<string>('GET', '/metrics')).body;
      return [...text.matchAll(/^orch_agent_vm_boots_total\{[^}]*\} (\d+)$/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
    };

    pgTest.beforeAll(async ({ openStore, tempDir }) => {
      agentDir = AgentProcess.makeDataDir();
      agent = await AgentProcess.start({ dataDir: agentDir });
      const env = orchdStoreEnv(await openStore('server'), await tempDir('orchd-data-'));
      orchd = await OrchdProcess.start({
        ...env,
        ORCH_AUTH_TOKEN: MASTER,
        MICROVM_AGENT_TOKEN: agent.token,
        ORCH_RECONCILE_INTERVAL_SEC: '2',
      });
      expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
      expect((await orch('host', 'register', '--url', agent.url, '--id', 'local')).code).toBe(0);
    });

    afterAll(async () => {
      await orchd?.stop();
      await agent?.stop();
      if (agentDir) AgentProcess.removeDataDir(agentDir);
      rmSync(config, { recursive: true, force: true });
      rmSync(defs, { recursive: true, force: true });
    });

    const THREE = [
      'echo one >> /workspace/log',
      'echo two >> /workspace/log',
      'echo three >> /workspace/log',
    ];
    let first: Build;

    test('three setup lines build three layers with distinct keys; progress lines and the artifact', async () => {
      const dir = definition('three', THREE);
      const r = await orch('build', dir);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const lines = r.stdout.trimEnd().split('\n');
      // one line per step: RUN, its position, duration, key prefix, the line
      const steps = lines.filter((l) => /^(RUN|CACHED) /.test(l));
      expect(steps).toHaveLength(3);
      for (const [i, l] of steps.entries()) {
        expect(l).toMatch(new RegExp(`^RUN +\\[${i + 1}/3\\] +\\d+\\.\\ds  [0-9a-f]{12}  ${THREE[i]}$`));
      }
      const artifact = /^artifact (snap_\S+)$/m.exec(r.stdout)?.[1];
      expect(r.stdout).toContain(`run it: orch up --from-build ${artifact} `);

      const { builds } = (await orchd.request('GET', '/v1/builds?task_id=three', as)).body as {
        builds: Build[];
      };
      expect(builds).toHaveLength(1);
      first = builds[0]!;
      expect(first).toMatchObject({
        state: 'ready',
        base_image: 'busybox',
        arch: 'amd64',
        artifact_snapshot_id: artifact,
      });
      expect(first.base_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(first.steps.map((s) => s.state)).toEqual(['built', 'built', 'built']);
      const keys = first.steps.map((s) => s.layer_key);
      expect(new Set(keys).size).toBe(3);
      for (const k of keys) expect(k).toMatch(/^[0-9a-f]{64}$/);
      for (const [i, l] of steps.entries()) expect(l).toContain(keys[i]!.slice(0, 12));
      expect(first.steps[2]!.snapshot_id).toBe(artifact);

      // Each layer is a snapshot that carries its key, arch and digest, kept 30 days by default.
      for (const [i, step] of first.steps.entries()) {
        const snap = await snapshot(step.snapshot_id!);
        expect(snap).toMatchObject({
          state: 'ready',
          kind: 'disk',
          layer_key: keys[i],
          arch: 'amd64',
          mode: 'build',
        });
        expect(snap.digest).toMatch(/^[0-9a-f]{64}$/);
        const days = (Date.parse(snap.retention_until!) - Date.now()) / 86_400_000;
        expect(Math.round(days)).toBe(30);
        expect(snap.parent_snapshot_id ?? null).toBe(i === 0 ? null : first.steps[i - 1]!.snapshot_id);
      }
      // The build VM is gone once the build ends.
      const vm = (await orchd.request('GET', `/v1/environments/${first.vm_id}`, as)).body as Environment;
      expect(vm.state).toBe('stopped');
    });

    test('the second build of the same file is all CACHED and boots no VM', async () => {
      const boots = await agentBoots();
      const table = await orch('build', join(defs, 'three'));
      expect(table.code).toBe(0);
      expect(table.stdout.split('\n').filter((l) => l.startsWith('CACHED '))).toHaveLength(3);
      const { build } = await buildJson(join(defs, 'three'));
      expect(build).toMatchObject({
        state: 'ready',
        vm_id: null,
        artifact_snapshot_id: first.artifact_snapshot_id,
      });
      expect(build!.steps.map((s) => [s.state, s.layer_key, s.snapshot_id])).toEqual(
        first.steps.map((s) => ['cached', s.layer_key, s.snapshot_id]),
      );
      expect(await agentBoots()).toBe(boots);
      const vms = (await agent.request<{ vms: unknown[] }>('GET', '/v1/vms')).body.vms;
      expect(vms).toEqual([]);
    });

    test('changing line 2 reuses layer 1 and rebuilds lines 2 and 3', async () => {
      const dir = definition('three-changed', [THREE[0]!, 'echo TWO >> /workspace/log', THREE[2]!]);
      const { build, code } = await buildJson(dir, '--task-id', 'three');
      expect(code).toBe(0);
      expect(build!.steps.map((s) => s.state)).toEqual(['cached', 'built', 'built']);
      expect(build!.steps[0]!.snapshot_id).toBe(first.steps[0]!.snapshot_id);
      expect(build!.steps[0]!.layer_key).toBe(first.steps[0]!.layer_key);
      expect(build!.steps[1]!.layer_key).not.toBe(first.steps[1]!.layer_key);
      // Line 3's text is unchanged, but its parent changed.
      expect(build!.steps[2]!.layer_key).not.toBe(first.steps[2]!.layer_key);
    });

    test('--no-cache builds every layer again, with the same keys', async () => {
      const { build, code } = await buildJson(join(defs, 'three'), '--no-cache');
      expect(code).toBe(0);
      expect(build!.steps.map((s) => s.state)).toEqual(['built', 'built', 'built']);
      expect(build!.steps.map((s) => s.layer_key)).toEqual(first.steps.map((s) => s.layer_key));
      for (const [i, s] of build!.steps.entries())
        expect(s.snapshot_id).not.toBe(first.steps[i]!.snapshot_id);
    });

    let secretBuild: Build;
    const SECRET_1 = `s3cr3t-${randomBytes(6).toString('hex')}`;
    const SECRET_2 = `s3cr3t-${randomBytes(6).toString('hex')}`;

    test("a secret's value changes the keys of the lines that see it and appears nowhere", async () => {
      const dir = definition(
        'secret',
        [`echo "\${#tok}" > /workspace/len`, 'echo after >> /workspace/log'],
        ['services:', '  app:', '    image: busybox', '    env:', '      TOKEN: { secret: tok }'].join('\n'),
      );
      const a = await buildJson(dir, '--secret', `tok=${SECRET_1}`);
      expect(a.code).toBe(0);
      const b = await buildJson(dir, '--secret', `tok=${SECRET_2}`);
      expect(b.code).toBe(0);
      secretBuild = a.build!;
      expect(a.build!.secret_names).toEqual(['tok']);
      expect(b.build!.steps.map((s) => s.state)).toEqual(['built', 'built']);
      for (const i of [0, 1]) expect(b.build!.steps[i]!.layer_key).not.toBe(a.build!.steps[i]!.layer_key);
      // The same value again: the same keys, all cached.
      const again = await buildJson(dir, '--secret', `tok=${SECRET_1}`);
      expect(again.build!.steps.map((s) => [s.state, s.layer_key])).toEqual(
        a.build!.steps.map((s) => ['cached', s.layer_key]),
      );
      // The line saw the value: the artifact has its length.
      const up = await orch(
        '-o',
        'json',
        'up',
        '--from-build',
        a.build!.artifact_snapshot_id!,
        join(defs, 'three'),
      );
      expect(up.code).toBe(0);
      const env = JSON.parse(up.stdout) as Environment;
      expect((await orch('exec', env.id, '--', 'cat', '/workspace/len')).stdout).toBe(`${SECRET_1.length}\n`);
      await orch('env', 'rm', env.id);
      // Nowhere: keys, build records, snapshot records, orchd's and the agent's logs, CLI output.
      const records = JSON.stringify([
        (await orchd.request('GET', '/v1/builds', as)).body,
        (await orchd.request('GET', '/v1/snapshots', as)).body,
        a,
        b,
        again,
      ]);
      for (const value of [SECRET_1, SECRET_2]) {
        expect(records).not.toContain(value);
        expect(orchd.output.join('\n')).not.toContain(value);
        expect(agent.output.join('\n')).not.toContain(value);
      }
    });

    test('a failing line fails the build with its output and leaves no layer for it', async () => {
      const dir = definition('fails', [
        'echo fine > /workspace/f',
        'echo boom-output; echo boom-err >&2; exit 3',
        'echo never',
      ]);
      const r = await orch('build', dir);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('boom-output');
      expect(r.stderr).toContain('boom-err');
      expect(r.stderr).toMatch(/orch: build bld_\S+ failed: setup line 2 exited with status 3/);
      const { builds } = (await orchd.request('GET', '/v1/builds?task_id=fails', as)).body as {
        builds: Build[];
      };
      const failed = builds[0]!;
      expect(failed).toMatchObject({ state: 'failed', artifact_snapshot_id: null });
      expect(failed.steps.map((s) => s.state)).toEqual(['built', 'failed', 'pending']);
      expect(failed.steps[1]).toMatchObject({ exit_code: 3, snapshot_id: null });
      expect(failed.steps[1]!.output).toContain('boom-output');
      const { snapshots } = (await orchd.request('GET', '/v1/snapshots', as)).body as {
        snapshots: Snapshot[];
      };
      expect(snapshots.filter((s) => s.layer_key === failed.steps[1]!.layer_key)).toEqual([]);
      expect(snapshots.filter((s) => s.layer_key === failed.steps[0]!.layer_key)).toHaveLength(1);
      // Its VM is gone; the next try reuses line 1.
      expect(
        ((await orchd.request('GET', `/v1/environments/${failed.vm_id}`, as)).body as Environment).state,
      ).toBe('stopped');
    });

    test("the CLI README's build-then-run example on debian-12: the printed command runs only the run lines; layer_key only on layers", async () => {
      // The README's commands, one after the other, each printing what the README shows.
      const [build, up, exec] = buildThenRunSteps();
      const built = await orch(...build!.argv.slice(1));
      expect(built.stderr).toBe('');
      expect(built.code).toBe(0);
      expect(masked(built.stdout)).toBe(masked(build!.output));
      const runIt = /^run it: (.+)$/m.exec(built.stdout)![1]!;
      expect(masked(runIt)).toBe(masked(up!.argv.join(' ')));
      const artifact = runIt.split(' ')[3]!;
      const ran = await orch(...runIt.split(' ').slice(1));
      expect(ran.stderr).toBe('');
      expect(ran.code).toBe(0);
      expect(masked(ran.stdout)).toBe(masked(up!.output));
      const envId = /^(env_\S+)/.exec(ran.stdout)![1]!;
      const env = (await orchd.request('GET', `/v1/environments/${envId}`, as)).body as Environment;
      expect(env).toMatchObject({
        state: 'running',
        seed_snapshot_id: artifact,
        spec: { image: 'debian-12' },
      });
      // Each setup line ran once, at build time; the run line serves the result on the exposed port.
      const argv = exec!.argv.slice(1).map((a) => (a.startsWith('env_') ? envId : a));
      expect(await orch(...argv)).toEqual({ code: 0, stdout: exec!.output, stderr: '' });
      await expect
        .poll(async () => (await fetch(`${env.ports[0]!.url}/built.txt`).catch(() => undefined))?.status, {
          timeout: 60_000,
        })
        .toBe(200);
      expect(await (await fetch(`${env.ports[0]!.url}/built.txt`)).text()).toBe(exec!.output);

      const { builds } = (await orchd.request('GET', '/v1/builds?task_id=build', as)).body as {
        builds: Build[];
      };
      expect(builds[0]).toMatchObject({ base_image: 'debian-12', artifact_snapshot_id: artifact });
      expect((await snapshot(artifact)).layer_key).toBe(builds[0]!.steps[1]!.layer_key);
      const manual = JSON.parse((await orch('-o', 'json', 'snapshot', 'create', envId)).stdout) as Snapshot;
      expect(manual.state).toBe('ready');
      expect(manual).not.toHaveProperty('layer_key');
      expect(await snapshot(manual.id)).not.toHaveProperty('layer_key');
      // A snapshot that is not a build layer is refused as --from-build, before anything starts.
      const refused = await orch('up', '--from-build', manual.id, '--image-is-base', 'examples/build');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`seed_snapshot_id ${manual.id} is not a build layer`);
      expect(refused.stderr).toContain('(invalid_argument)');
      await orch('env', 'rm', envId);
      await orch('snapshot', 'rm', manual.id);
    });

    test('layer keys are the same on a second orchd process on the same database', async () => {
      const second = await OrchdProcess.start({ ...orchd.env, ORCH_PORT: '0' });
      try {
        const r = await second.request('POST', '/v1/builds', {
          ...as,
          body: {
            task_id: 'secret',
            spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 900 },
            workspace: '/workspace',
            setup: secretBuild.steps.map((s) => s.line),
            secrets: { tok: SECRET_1 },
          },
        });
        expect(r.status).toBe(201);
        const b = r.body as Build;
        expect(b.state).toBe('ready');
        expect(b.steps.map((s) => [s.state, s.layer_key])).toEqual(
          secretBuild.steps.map((s) => ['cached', s.layer_key]),
        );
      } finally {
        await second.stop();
      }
    });
  });
});
