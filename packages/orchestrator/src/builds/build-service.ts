import {
  type Build,
  type BuildStep,
  type CreateBuildRequest,
  DEFAULT_IMAGE,
  OrchError,
  SECRET_NAME,
  SECRET_NAME_RULE,
} from '@orch/protocol';
import { Periodic, type Service, sleep } from '@support/server';
import type { Logger } from 'pino';
import { toOrchError } from '../api/errors.js';
import { recordId } from '../crypto/secrets.js';
import type { EnvironmentService } from '../environments/environment-service.js';
import type { HostService } from '../hosts/host-service.js';
import type { OrchdMetrics } from '../metrics.js';
import { type BuildRow, type BuildsRepo, toBuild } from '../store/builds-repo.js';
import type { SnapshotsRepo } from '../store/snapshots-repo.js';
import { LayerCache, type Plan } from './layer-cache.js';
import { BUILD_LINE_ENV } from './layer-key.js';

/** What the guest accepts as an environment variable name (ExecRequest.env). */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** How much of a failed line's output the build record keeps (its end). */
const OUTPUT_TAIL = 64 * 1024;

export interface BuildSettings {
  /** How long a build layer is kept after it was last written or used (its `retention_until`). */
  readonly layerRetentionMs: number;
  /** How often a running build's record is touched, and stale ones (no touch for 4 rounds) failed. */
  readonly heartbeatMs: number;
  /** Polling interval while the build VM boots. */
  readonly pollMs: number;
}

/**
 * Builds: each `setup:` line becomes a build layer, a disk snapshot carrying `layer_key`. The
 * cached prefix of the lines is found first (no VM); then one build VM boots from the last cached
 * layer (or the base image), runs each remaining line over exec, and snapshots its disk after
 * each. The build VM is an environment (placement, capacity, reconciler), deleted when the build
 * ends. Keys, lookups and writing layers are the {@link LayerCache}'s; this is the build's record
 * and its VM.
 *
 * As a service it touches its running builds' records every `heartbeatMs` and fails builds whose
 * orchd stopped touching them (it died mid-build); stopping it fails its running builds.
 */
export class BuildService implements Service {
  readonly name = 'builds';
  private readonly running = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private readonly layers: LayerCache;

  constructor(
    private readonly repo: BuildsRepo,
    snapshots: SnapshotsRepo,
    private readonly envs: EnvironmentService,
    private readonly hosts: HostService,
    macKey: Buffer,
    private readonly settings: BuildSettings,
    private readonly logger: Logger,
    metrics?: OrchdMetrics,
  ) {
    this.layers = new LayerCache(snapshots, hosts, envs.agents, macKey, settings.layerRetentionMs, metrics);
  }

  /**
   * Starts a build: answers at once with the steps and their keys (cached ones already `cached`);
   * a build whose every line is cached is `ready` right away and boots nothing.
   */
  async create(req: CreateBuildRequest): Promise<Build> {
    if (req.spec.gpu) {
      throw OrchError.invalid('builds run on microvm hosts: remove resources.gpu to build', {
        field: 'spec.gpu',
      });
    }
    // Own properties only: a name like `__proto__` is a name like any other.
    const secrets = new Map(Object.entries(req.secrets));
    for (const name of secrets.keys()) {
      // Setup lines see each secret as an environment variable (as the startup script does).
      if (!SECRET_NAME.test(name) || !ENV_NAME.test(name)) {
        throw OrchError.invalid(
          `secrets: name ${JSON.stringify(name.slice(0, 130))} must be ${SECRET_NAME_RULE}`,
          {
            field: 'secrets',
          },
        );
      }
    }
    const image = req.spec.image ?? DEFAULT_IMAGE;
    const plan = await this.layers.plan(req, image, secrets);
    const id = recordId('bld_');
    await this.repo.insert({
      id,
      task_id: req.task_id,
      base_image: image,
      spec: req.spec,
      workspace: req.workspace,
      no_cache: req.no_cache,
      secret_names: [...secrets.keys()].sort(),
    });
    const steps: BuildStep[] = req.setup.map((line, index) => ({
      index,
      line,
      state: index < plan.hits.length ? 'cached' : 'pending',
      layer_key: plan.keys[index]!,
      snapshot_id: plan.hits[index]?.id ?? null,
      duration_ms: index < plan.hits.length ? 0 : null,
      exit_code: null,
      output: null,
    }));
    await this.repo.update(id, { host_id: plan.host.id, arch: plan.arch, base_digest: plan.digest, steps });
    this.logger.info(
      { build: id, task: req.task_id, lines: steps.length, cached: plan.hits.length },
      'build started',
    );
    if (plan.hits.length === steps.length) {
      await this.repo.finish(id, 'ready', { artifact_snapshot_id: plan.hits.at(-1)!.id });
      this.logger.info({ build: id }, 'build ready: every layer cached');
    } else {
      this.start(id, req, secrets, plan, steps);
    }
    return this.get(id);
  }

  async get(id: string): Promise<Build> {
    const row = await this.repo.get(id);
    if (!row) throw OrchError.notFound('build', id);
    return toBuild(row);
  }

  async list(filter: { task_id?: string | undefined; state?: string | undefined }): Promise<Build[]> {
    return (await this.repo.list(filter)).map(toBuild);
  }

  private start(
    id: string,
    req: CreateBuildRequest,
    secrets: Map<string, string>,
    plan: Plan,
    steps: BuildStep[],
  ): void {
    const abort = new AbortController();
    const done = this.execute(id, req, secrets, plan, steps, abort.signal)
      .catch((err: unknown) => this.logger.error({ build: id, err: (err as Error).message }, 'build crashed'))
      .finally(() => this.running.delete(id));
    this.running.set(id, { abort, done });
  }

  /** Boots the build VM, runs the uncached lines, snapshots each, and always deletes the VM. */
  private async execute(
    id: string,
    req: CreateBuildRequest,
    secrets: Map<string, string>,
    plan: Plan,
    steps: BuildStep[],
    signal: AbortSignal,
  ): Promise<void> {
    const started = Date.now();
    const deadline = started + req.spec.max_runtime_seconds * 1000;
    let vmId: string | undefined;
    let current: number | undefined;
    const save = async () => {
      if (!(await this.repo.update(id, { steps }))) throw new BuildEnded();
    };
    try {
      const seed = plan.hits.at(-1);
      const env = await this.envs.create(
        {
          task_id: req.task_id,
          spec: { ...req.spec, max_runtime_seconds: req.spec.max_runtime_seconds },
          manifest_inline: Buffer.from(
            JSON.stringify({ version: '1', machine: { workspace: req.workspace }, services: {} }),
          ).toString('base64'),
          secrets: {},
          startup_script: '#!/bin/sh\n',
          expose: [],
        },
        seed ? { seed } : {},
      );
      vmId = env.id;
      await this.repo.update(id, { vm_id: env.id, host_id: env.host_id });
      if (!seed && env.host_id !== plan.host.id) {
        // Placed on another host than planned: its base digest and arch make the keys.
        const host = await this.hosts.get(env.host_id);
        const on = this.layers.keysOn(host, req.spec.image ?? DEFAULT_IMAGE, req, secrets);
        if (!on) throw new OrchError('unavailable', `host ${host.id} reports no digest for the base image`);
        steps.forEach((s, i) => {
          s.layer_key = on.keys[i]!;
        });
        await this.repo.update(id, { arch: host.arch, base_digest: on.digest, steps });
      }
      await this.waitRunning(env.id, signal);
      let parent = seed?.id ?? null;
      for (let i = plan.hits.length; i < steps.length; i++) {
        if (signal.aborted) throw new OrchError('unavailable', 'orchd stopped during the build');
        current = i;
        const step = steps[i]!;
        step.state = 'running';
        await save();
        const lineStarted = Date.now();
        const remaining = Math.floor((deadline - lineStarted) / 1000);
        if (remaining < 1) throw new OrchError('unavailable', 'the build ran out of max_runtime_seconds');
        const result = await this.envs.exec(env.id, {
          argv: ['/bin/sh', '-c', lineScript(req.workspace, step.line)],
          env: { ...BUILD_LINE_ENV, ...Object.fromEntries(secrets) },
          timeout_seconds: Math.min(remaining, 24 * 3600),
        });
        if (result.exit_code !== 0) {
          const output = redact(
            Buffer.concat([
              Buffer.from(result.stdout_base64, 'base64'),
              Buffer.from(result.stderr_base64, 'base64'),
            ]),
            secrets,
          );
          step.state = 'failed';
          step.exit_code = result.exit_code;
          step.output = output;
          step.duration_ms = Date.now() - lineStarted;
          await save();
          current = undefined;
          const why = result.timed_out ? 'did not finish in time' : `exited with status ${result.exit_code}`;
          await this.repo.finish(id, 'failed', { last_error: `setup line ${i + 1} ${why}: ${step.line}` });
          this.logger.info(
            { build: id, line: i + 1, exit_code: result.exit_code },
            'build failed: a line failed',
          );
          return;
        }
        const snapshotId = await this.layers.write({
          vmId: env.id,
          hostId: env.host_id,
          taskId: req.task_id,
          buildId: id,
          index: i,
          key: step.layer_key,
          parent,
        });
        parent = snapshotId;
        step.state = 'built';
        step.exit_code = 0;
        step.snapshot_id = snapshotId;
        step.duration_ms = Date.now() - lineStarted;
        current = undefined;
        await save();
      }
      await this.repo.finish(id, 'ready', { artifact_snapshot_id: parent! });
      this.logger.info({ build: id, ms: Date.now() - started }, 'build ready');
    } catch (err) {
      if (err instanceof BuildEnded) return;
      const message = toOrchError(err).message;
      if (current !== undefined) {
        steps[current]!.state = 'failed';
        steps[current]!.output = redact(Buffer.from(message), secrets);
        await this.repo.update(id, { steps }).catch(() => undefined);
      }
      await this.repo.finish(id, 'failed', { last_error: redact(Buffer.from(message), secrets) });
      this.logger.warn({ build: id, err: message }, 'build failed');
    } finally {
      if (vmId) {
        await this.envs
          .delete(vmId)
          .catch((err: unknown) =>
            this.logger.warn({ build: id, env: vmId, err: (err as Error).message }, 'build VM not deleted'),
          );
      }
    }
  }

  private async waitRunning(envId: string, signal: AbortSignal): Promise<void> {
    for (;;) {
      if (signal.aborted) throw new OrchError('unavailable', 'orchd stopped during the build');
      const env = await this.envs.get(envId);
      if (env.state === 'running') return;
      if (env.state !== 'creating') {
        throw new OrchError('unavailable', `the build VM did not start: ${env.last_error ?? env.state}`);
      }
      await sleep(this.settings.pollMs, signal).catch(() => undefined);
    }
  }

  /**
   * Every `heartbeatMs`: touches this orchd's running builds, and fails running builds nobody
   * touched for four rounds (their orchd died) and deletes their VMs. On abort, fails and cleans up
   * its own running builds before it resolves.
   */
  async run(signal: AbortSignal): Promise<void> {
    await new Periodic({
      name: 'builds',
      intervalMs: this.settings.heartbeatMs,
      log: this.logger,
      delayFirst: true,
      tick: async ({ now }) => {
        for (const id of this.running.keys()) await this.repo.update(id, {});
        for (const row of await this.repo.stale(new Date(now.getTime() - 4 * this.settings.heartbeatMs))) {
          if (this.running.has(row.id)) continue;
          await this.abandon(row);
        }
      },
    }).run(signal);
    for (const { abort } of this.running.values()) abort.abort();
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  private async abandon(row: BuildRow): Promise<void> {
    if (await this.repo.finish(row.id, 'failed', { last_error: 'the orchd running this build stopped' })) {
      this.logger.warn({ build: row.id }, 'build failed: its orchd stopped');
      if (row.vm_id) await this.envs.delete(row.vm_id).catch(() => undefined);
    }
  }
}

/** Thrown when the build's record is no longer `running` (failed by another orchd as stale). */
class BuildEnded extends Error {}

/** The script of one setup line: strict mode, in the workspace (created if missing), then the line. */
export function lineScript(workspace: string, line: string): string {
  const ws = `'${workspace.replaceAll("'", `'\\''`)}'`;
  return `set -eu\nmkdir -p ${ws}\ncd ${ws}\n${line}\n`;
}

/** Output as text, its last {@link OUTPUT_TAIL} bytes, with every secret value replaced by `***`. */
function redact(bytes: Buffer, secrets: ReadonlyMap<string, string>): string {
  let text = bytes.subarray(Math.max(0, bytes.length - OUTPUT_TAIL)).toString('utf8');
  for (const value of [...secrets.values()].sort((a, b) => b.length - a.length)) {
    if (value !== '') text = text.replaceAll(value, '***');
  }
  return text.replaceAll('\u0000', '\uFFFD');
}
