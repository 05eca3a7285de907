import {
  AGENT_VM_PATHS,
  type Build,
  type BuildStep,
  type CreateBuildRequest,
  type Host,
  OrchError,
  SECRET_NAME,
  SECRET_NAME_RULE,
  SnapshotArtifact,
} from '@orch/protocol';
import { Periodic, type Service, sleep } from '@support/server';
import type { Logger } from 'pino';
import { toOrchError } from '../api/errors.js';
import { randomId } from '../crypto/secrets.js';
import type { EnvironmentService } from '../environments/environment-service.js';
import type { HostService } from '../hosts/host-service.js';
import type { OrchdMetrics } from '../metrics.js';
import { type BuildRow, type BuildsRepo, toBuild } from '../store/builds-repo.js';
import type { SnapshotRow, SnapshotsRepo } from '../store/snapshots-repo.js';
import { BUILD_LINE_ENV, layerKeys, secretMacs } from './layer-key.js';

/** The image a spec without `image` boots (the agent's default). */
export const DEFAULT_BUILD_IMAGE = 'busybox';

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

/** Where a build starts: the keys for one (arch, base digest) and the layers already kept. */
interface Plan {
  readonly host: Host;
  readonly arch: string;
  readonly digest: string;
  readonly keys: string[];
  /** The cached prefix: `hits[i]` is the kept layer of line i. */
  readonly hits: SnapshotRow[];
}

/**
 * Builds: each `setup:` line becomes a build layer, a disk snapshot carrying `layer_key`. The
 * cached prefix of the lines is found first (no VM); then one build VM boots from the last cached
 * layer (or the base image), runs each remaining line over exec, and snapshots its disk after
 * each; the key is written with `ready`, so a lookup never finds a half-written layer. The build
 * VM is an environment (placement, capacity, reconciler), deleted when the build ends.
 *
 * As a service it touches its running builds' records every `heartbeatMs` and fails builds whose
 * orchd stopped touching them (it died mid-build); stopping it fails its running builds.
 */
export class BuildService implements Service {
  readonly name = 'builds';
  private readonly running = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(
    private readonly repo: BuildsRepo,
    private readonly snapshots: SnapshotsRepo,
    private readonly envs: EnvironmentService,
    private readonly hosts: HostService,
    private readonly macKey: Buffer,
    private readonly settings: BuildSettings,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
  ) {}

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
    const image = req.spec.image ?? DEFAULT_BUILD_IMAGE;
    const plan = await this.plan(req, image, secrets);
    const id = randomId('bld_', 12).replace(/[^A-Za-z0-9_-]/g, '');
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

  /**
   * The keys for every (arch, base digest) the healthy hosts with the image offer, and the one whose
   * cached prefix is longest (with `no_cache`, none is looked up). Cache hits get their retention
   * extended; one that is no longer `ready` ends the prefix.
   */
  private async plan(req: CreateBuildRequest, image: string, secrets: Map<string, string>): Promise<Plan> {
    const all = (await this.hosts.list()).filter((h) => h.kind === 'microvm');
    const withImage = all.filter((h) => h.images.includes(image));
    if (withImage.length === 0) {
      throw OrchError.invalid(`image "${image}" is on no microvm host; nothing can build from it`, {
        field: 'spec.image',
      });
    }
    const usable = withImage.filter((h) => h.state === 'active' && h.health === 'healthy');
    if (usable.length === 0) {
      throw new OrchError(
        'unavailable',
        `no active, healthy host has image "${image}" (${withImage.map((h) => `${h.id}: ${h.state}, ${h.health}`).join('; ')})`,
      );
    }
    const macs = secretMacs(this.macKey, secrets);
    const now = new Date();
    let best: Plan | undefined;
    const seen = new Set<string>();
    for (const host of [...usable].sort((a, b) => (a.id < b.id ? -1 : 1))) {
      const digest = host.image_details.find((d) => d.name === image)?.digest;
      if (!digest) continue;
      if (seen.has(`${host.arch} ${digest}`)) continue;
      seen.add(`${host.arch} ${digest}`);
      const keys = layerKeys(
        {
          baseDigest: digest,
          arch: host.arch,
          storageGb: req.spec.storage_gb,
          workspace: req.workspace,
          env: BUILD_LINE_ENV,
          secretMacs: macs,
        },
        req.setup,
      );
      const hits: SnapshotRow[] = [];
      if (!req.no_cache) {
        for (const key of keys) {
          const layer = await this.snapshots.findLayer(key, host.arch, now);
          if (!layer) break;
          hits.push(layer);
        }
      }
      if (!best || hits.length > best.hits.length) best = { host, arch: host.arch, digest, keys, hits };
    }
    if (!best) {
      throw new OrchError(
        'unavailable',
        `no host reports a digest for image "${image}"; layer keys start from it (run orch-agent setup again on ${usable.map((h) => h.id).join(', ')})`,
      );
    }
    const until = new Date(now.getTime() + this.settings.layerRetentionMs);
    const kept: SnapshotRow[] = [];
    for (const hit of best.hits) {
      if (!(await this.snapshots.keepLayer(hit.id, until))) break;
      kept.push(hit);
    }
    const host =
      kept.length > 0 ? (usable.find((h) => h.id === kept.at(-1)!.host_id) ?? best.host) : best.host;
    return { ...best, host, hits: kept };
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
        const digest = host.image_details.find(
          (d) => d.name === (req.spec.image ?? DEFAULT_BUILD_IMAGE),
        )?.digest;
        if (!digest)
          throw new OrchError('unavailable', `host ${host.id} reports no digest for the base image`);
        const keys = layerKeys(
          {
            baseDigest: digest,
            arch: host.arch,
            storageGb: req.spec.storage_gb,
            workspace: req.workspace,
            env: BUILD_LINE_ENV,
            secretMacs: secretMacs(this.macKey, secrets),
          },
          req.setup,
        );
        steps.forEach((s, i) => {
          s.layer_key = keys[i]!;
        });
        await this.repo.update(id, { arch: host.arch, base_digest: digest, steps });
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
        const snapshotId = await this.layer(env.id, env.host_id, req.task_id, id, i, step.layer_key, parent);
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

  /**
   * Snapshots the build VM's disk as the layer of line `index`: the record is written `creating`
   * without a key, and gets its key only together with `ready` and the artifact's digest.
   */
  private async layer(
    vmId: string,
    hostId: string,
    taskId: string,
    buildId: string,
    index: number,
    layerKey: string,
    parent: string | null,
  ): Promise<string> {
    const id = randomId('snap_', 12).replace(/[^A-Za-z0-9_-]/g, '');
    await this.snapshots.insert({
      id,
      vm_id: vmId,
      task_id: taskId,
      host_id: hostId,
      parent_snapshot_id: parent,
      mode: 'build',
      comment: `build ${buildId}, setup line ${index + 1}`,
      requested_live: false,
      retention_until: new Date(Date.now() + this.settings.layerRetentionMs),
    });
    const started = performance.now();
    try {
      const agent = await this.envs.agents.forHost(hostId);
      const artifact = await agent.json(
        'POST',
        AGENT_VM_PATHS.snapshots(vmId),
        { snapshot_id: id, live: false },
        SnapshotArtifact,
        { timeoutMs: 600_000 },
      );
      await this.snapshots.transition(id, ['creating'], 'ready', {
        kind: artifact.kind,
        digest: artifact.digest,
        arch: artifact.arch,
        size_bytes: artifact.size_bytes,
        layer_key: layerKey,
      });
      this.measured('ok', started);
      return id;
    } catch (err) {
      const apiError = toOrchError(err);
      this.measured('error', started);
      await this.snapshots.transition(id, ['creating'], 'error', { last_error: apiError.message });
      throw apiError;
    }
  }

  private measured(outcome: string, started: number): void {
    this.metrics?.snapshotOperations.inc({ operation: 'create', kind: 'disk', outcome });
    this.metrics?.snapshotDuration.observe(
      { operation: 'create', kind: 'disk' },
      (performance.now() - started) / 1000,
    );
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
