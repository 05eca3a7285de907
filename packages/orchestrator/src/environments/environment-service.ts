import { randomBytes } from 'node:crypto';
import {
  AGENT_VM_PATHS,
  AgentVm,
  type CreateEnvironmentRequest,
  type CreateVmRequest,
  DEFAULT_IMAGE,
  decodeManifestInline,
  type Environment,
  EXEC_OUTPUT_LIMIT,
  type ExecRequest,
  ExecResult,
  execWaitMs,
  type Host,
  type ManifestService,
  manifestServices,
  OrchError,
  VM_SECRET_NAME,
  type VmSpec,
} from '@orch/protocol';
import { sleep } from '@support/server';
import type { Logger } from 'pino';
import { toOrchError } from '../api/errors.js';
import { recordId } from '../crypto/secrets.js';
import type { TokenBox } from '../crypto/token-box.js';
import { MAX_ANSWER_BYTES } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { OrchdMetrics } from '../metrics.js';
import {
  type EnvironmentRow,
  type EnvironmentsRepo,
  type HostUsage,
  toEnvironment,
} from '../store/environments-repo.js';
import type { IdempotencyRecord, IdempotencyRepo } from '../store/idempotency-repo.js';
import type { PortJson } from '../store/schema.js';
import type { SnapshotRow } from '../store/snapshots-repo.js';
import type { Agents } from './agents.js';
import { type CreateKey, requestFingerprint } from './create-key.js';
import { FailedCreates } from './failed-creates.js';
import type { Placer } from './placer.js';
import { type Placement, type PlacementRequest, place } from './scheduler.js';
import type { TravelService } from './travel-service.js';

/** Largest exec answer: two streams of EXEC_OUTPUT_LIMIT bytes, base64, plus the envelope. */
const EXEC_ANSWER_BYTES = Math.ceil((2 * EXEC_OUTPUT_LIMIT * 4) / 3) + MAX_ANSWER_BYTES;

export interface EnvironmentTimeouts {
  /** How long a VM may stay `creating` before the environment is `error`. */
  readonly createMs: number;
  /** Polling interval while waiting for a VM to come up. */
  readonly pollMs: number;
  /** How long an idempotency key names its environment. */
  readonly idempotencyRetentionMs: number;
}

/**
 * Environments: placement, creation on the agent, lifecycle, exec. Creation is two steps: the
 * record is written with its capacity reserved (by the {@link Placer}), then the agent is asked
 * to create the VM; a watcher then follows the VM to `running` or `error`. The reconciler covers
 * everything a watcher cannot (an orchd restart, a crashed VM, max runtime).
 */
export class EnvironmentService {
  private readonly watchers = new Set<Promise<void>>();
  private stopping = false;
  private readonly failed: FailedCreates;

  constructor(
    private readonly repo: EnvironmentsRepo,
    private readonly hosts: HostService,
    readonly agents: Agents,
    private readonly box: TokenBox,
    private readonly placer: Placer,
    private readonly keys: IdempotencyRepo,
    private readonly timeouts: EnvironmentTimeouts,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
  ) {
    this.failed = new FailedCreates(repo, keys, agents, timeouts.createMs, logger);
  }

  /**
   * Creates an environment. `restore` restores a snapshot (a new VM on the snapshot's host, with the
   * original environment's request); `seed` boots a build artifact's disk (from-build). Either way
   * the snapshot's disk is the root filesystem: the record keeps the image it descends from in
   * `spec.image` (for a seed, the layer's: {@link seededSpec}), while placement and the agent see
   * the spec without it ({@link withoutImage}).
   */
  async create(
    req: CreateEnvironmentRequest,
    opts: { restore?: SnapshotRow; seed?: SnapshotRow } = {},
  ): Promise<Environment> {
    return (await this.createKeyed(req, opts)).environment;
  }

  /**
   * Creates an environment, or, when `opts.key` names one created within the retention by the
   * same caller with the same request, answers that one (`replayed`). The same key with another
   * request is `409 conflict`. Steps: placement in this orchd's queue ({@link Placer}: the record
   * is written in `creating` with its capacity, the key claimed in the same transaction), then the
   * agent's create. If the agent fails or times out, the create answers that error and leaves
   * nothing behind ({@link FailedCreates}); once the agent has answered with the VM, the create succeeds
   * (recording what the agent said is retried by the watcher, never turned into an error).
   */
  async createKeyed(
    req: CreateEnvironmentRequest,
    opts: { restore?: SnapshotRow; seed?: SnapshotRow; key?: CreateKey } = {},
  ): Promise<{ environment: Environment; replayed: boolean }> {
    // The manifest, its service names and images, checked before anything is placed (the agent
    // checks them again).
    const services = manifestServices(decodeManifestInline(req.manifest_inline));
    const needed = secretReferences(services);
    // Own properties only: a name like `constructor` or `__proto__` is not a value given. Values of
    // names the manifest does not reference are dropped (only the referenced ones are kept).
    const given = new Map(Object.entries(req.secrets));
    const missing = needed.filter((name) => !given.has(name));
    if (missing.length > 0) {
      throw OrchError.invalid(
        `secrets missing for the manifest's secret references: ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ` (and ${missing.length - 20} more)` : ''}`,
        { missing: missing.slice(0, 20), missing_count: missing.length },
      );
    }
    const { key } = opts;
    const fingerprint = key ? requestFingerprint(req) : '';
    if (key) {
      const known = await this.keys.find(key.scope, key.key, this.keyCutoff());
      if (known) return this.replay(known, fingerprint);
    }
    const secrets: Record<string, string> = Object.fromEntries([
      ...needed.map((n) => [n, given.get(n)!] as const),
      [VM_SECRET_NAME, randomBytes(32).toString('base64url')] as const,
    ]);
    const snapshot = opts.restore ?? opts.seed;
    const spec = opts.seed ? await this.seededSpec(req.spec, opts.seed) : req.spec;
    const placed = snapshot ? withoutImage(spec) : spec;
    const id = recordId('env_');
    const outcome = await this.placer.place({
      spec: placed,
      decide: (hosts, usage) => {
        const placement = place(hosts, usage, {
          spec: placed,
          services,
          ...(snapshot ? { onHost: snapshot.host_id } : {}),
        });
        // The snapshot's host is cordoned, unhealthy, full or gone: another host fetches the artifact.
        if (!placement.ok && snapshot && this.travel)
          return this.elsewhere(hosts, usage, { spec: placed, services }, snapshot, placement);
        return placement;
      },
      record: (hostId) => ({
        id,
        task_id: req.task_id,
        host_id: hostId,
        spec,
        manifest_inline: req.manifest_inline,
        startup_script: req.startup_script,
        expose: req.expose,
        secrets_enc: this.box.seal(JSON.stringify(secrets)),
        secret_names: needed,
        seed_snapshot_id: opts.seed?.id ?? null,
        restored_from_snapshot_id: opts.restore?.id ?? null,
        services: services.map((s) => ({
          name: s.name,
          image: s.image,
          state: 'starting' as const,
          restarts: 0,
          ports: [...s.ports],
        })),
      }),
      ...(key ? { claim: { ...key, fingerprint, environment_id: id } } : {}),
    });
    if (outcome.kind === 'replay') return this.replay(outcome.record, fingerprint);
    const { row } = outcome;
    this.logger.info({ env: row.id, host: row.host_id, task: row.task_id }, 'environment placed');
    let vm: AgentVm;
    let agentUrl: string;
    try {
      if (snapshot && row.host_id !== snapshot.host_id) await this.travel!.ensureOn(snapshot, row.host_id);
      const agent = await this.agents.forHost(row.host_id);
      vm = await agent.json('POST', AGENT_VM_PATHS.vms, this.vmRequest(row, secrets), AgentVm);
      agentUrl = agent.baseUrl;
    } catch (err) {
      const apiError = toOrchError(err);
      this.logger.warn({ env: row.id, err: apiError.message }, 'environment creation failed');
      await this.failed.undo(row, apiError.message, key);
      throw apiError;
    }
    this.metrics?.environmentsCreated.inc({
      origin: opts.restore ? 'restore' : opts.seed ? 'build' : 'request',
    });
    // The VM exists and the record holds its capacity: the create has succeeded. What the agent
    // said is recorded now if the store takes it, else by the watcher (and the reconciler).
    await this.record(row.id, vm, agentUrl).catch((err: unknown) =>
      this.logger.warn(
        { env: row.id, err: (err as Error).message },
        'recording the new VM failed; the watcher retries',
      ),
    );
    const now = await this.repo.get(row.id).catch(() => undefined);
    // Follow it until it runs (unless it already does).
    if (now?.state !== 'running') this.watch(row.id);
    return { environment: toEnvironment(now ?? row), replayed: false };
  }

  /** The environment an idempotency key names (a create with the same request made it). */
  private async replay(
    known: IdempotencyRecord,
    fingerprint: string,
  ): Promise<{ environment: Environment; replayed: boolean }> {
    if (known.fingerprint !== fingerprint) {
      throw OrchError.conflict(
        `this Idempotency-Key was already used for another request (it created environment ${known.environment_id}); send a new key for a new environment`,
        { reason: 'idempotency_key_reused', environment_id: known.environment_id },
      );
    }
    const row = await this.repo.get(known.environment_id);
    if (!row) throw OrchError.notFound('environment', known.environment_id);
    return { environment: toEnvironment(row), replayed: true };
  }

  private keyCutoff(): Date {
    return new Date(Date.now() - this.timeouts.idempotencyRetentionMs);
  }

  /** Cross-host restores and seeds (set by the server). */
  travel: TravelService | undefined;

  /**
   * Placement of a restore or seed away from the snapshot's host: any other host the artifact is
   * portable to ({@link TravelService.portableTo}). None portable: `409 conflict` saying why each
   * is not (a live snapshot never resumes where it would crash); portable ones all busy: the
   * scheduler's answer.
   */
  private elsewhere(
    hosts: readonly Host[],
    usage: ReadonlyMap<string, HostUsage>,
    req: Omit<PlacementRequest, 'onHost'>,
    snapshot: SnapshotRow,
    first: Placement & { ok: false },
  ): Placement {
    const others = hosts.filter((h) => h.id !== snapshot.host_id && h.kind === 'microvm');
    const why = others.map((h) => this.travel!.portableTo(snapshot, h)).filter((w) => w !== undefined);
    const portable = others.filter((h) => this.travel!.portableTo(snapshot, h) === undefined);
    if (others.length > 0 && portable.length === 0) {
      throw new OrchError(
        'conflict',
        `snapshot ${snapshot.id} cannot start on another host: ${why.join('; ')} (its own host: ${first.message})`,
        { reason: 'not_portable' },
      );
    }
    const next = place(portable, usage, req);
    if (next.ok) return next;
    return { ...next, message: `${first.message}; elsewhere: ${next.message}` };
  }

  /** Ids of every registered host. */
  async hostIds(): Promise<string[]> {
    return (await this.hosts.list()).map((h) => h.id);
  }

  /**
   * The agent's create request for an environment row: every path that starts a VM (create,
   * restore, from-build, a build's VM, a move) sends this. `moved` is the artifact a move resumes
   * on its target (instead of what the row started from). Started from a snapshot, the spec goes
   * without `image`: the snapshot's disk is the root filesystem, the row keeps the image.
   */
  vmRequest(row: EnvironmentRow, secrets: Record<string, string>, moved?: string): CreateVmRequest {
    const restore = moved ?? row.restored_from_snapshot_id ?? undefined;
    const seed = moved === undefined ? (row.seed_snapshot_id ?? undefined) : undefined;
    return {
      id: row.id,
      spec: restore || seed ? withoutImage(row.spec) : row.spec,
      manifest_inline: row.manifest_inline,
      startup_script: row.startup_script,
      secrets,
      expose: row.expose,
      ...(seed ? { seed_snapshot_id: seed } : {}),
      ...(restore ? { restore_snapshot_id: restore } : {}),
    };
  }

  /**
   * The spec a from-build environment records: the image its layer was built on (the build VM's
   * record says which; none there is the default image). A request naming another image is
   * refused: it would say the environment runs an image it does not.
   */
  private async seededSpec(spec: VmSpec, layer: SnapshotRow): Promise<VmSpec> {
    const built = (await this.repo.get(layer.vm_id))?.spec.image;
    const base = built ?? DEFAULT_IMAGE;
    if (spec.image !== undefined && spec.image !== base) {
      throw OrchError.invalid(
        `spec.image "${spec.image}" is not the image build layer ${layer.id} was built on ("${base}"): its disk is the root filesystem; set spec.image to "${base}" or leave it out`,
        { field: 'spec.image' },
      );
    }
    const image = spec.image ?? built;
    return image === undefined ? spec : { ...spec, image };
  }

  /** The secret values of an environment (to restore it elsewhere), decrypted. */
  secretsOf(row: EnvironmentRow): Record<string, string> {
    return JSON.parse(this.box.open(row.secrets_enc)) as Record<string, string>;
  }

  async get(id: string): Promise<Environment> {
    return toEnvironment(await this.row(id));
  }

  async row(id: string): Promise<EnvironmentRow> {
    const row = await this.repo.get(id);
    if (!row) throw OrchError.notFound('environment', id);
    return row;
  }

  async list(filter: {
    state?: string | undefined;
    task_id?: string | undefined;
    host_id?: string | undefined;
  }): Promise<Environment[]> {
    return (await this.repo.list(filter)).map(toEnvironment);
  }

  /** Stops the VM and frees its capacity. Idempotent: a stopped environment is returned as it is. */
  async delete(id: string): Promise<Environment> {
    const row = await this.row(id);
    if (row.state === 'stopped' || row.state === 'error') return toEnvironment(row);
    await this.repo.transition(id, ['creating', 'running', 'pausing', 'paused', 'resuming'], 'stopping');
    await this.stopOnAgent(row).catch((err: unknown) => {
      // The reconciler retries; the environment stays `stopping` and holds its capacity meanwhile.
      this.logger.warn({ env: id, err: (err as Error).message }, 'stop failed; will retry');
    });
    return toEnvironment((await this.repo.get(id))!);
  }

  /** Deletes the VM on its agent (a VM already gone counts as done) and records `stopped`. */
  async stopOnAgent(row: EnvironmentRow, reason: string | null = null): Promise<void> {
    await (await this.agents.forHost(row.host_id)).deleteIfPresent(AGENT_VM_PATHS.vm(row.id));
    await this.repo.transition(
      row.id,
      ['running', 'stopping'],
      'stopped',
      reason ? { last_error: reason } : {},
    );
    this.logger.info({ env: row.id, reason }, 'environment stopped');
  }

  /** Runs a command in the guest (environment must be running). */
  async exec(id: string, body: ExecRequest): Promise<ExecResult> {
    const row = await this.row(id);
    if (row.state !== 'running')
      throw new OrchError('conflict', `environment ${id} is ${row.state}, not running`, { state: row.state });
    const agent = await this.agents.forHost(row.host_id);
    const timeoutMs = execWaitMs(body.timeout_seconds);
    // Output up to EXEC_OUTPUT_LIMIT per stream, base64: more than the default answer limit.
    return agent.json('POST', AGENT_VM_PATHS.exec(id), body, ExecResult, {
      timeoutMs,
      maxBytes: EXEC_ANSWER_BYTES,
    });
  }

  /**
   * Applies what the agent reports about a VM to its environment. Ports forwarded on a wildcard
   * address are reachable at the agent's own host name, so that is what the record says.
   */
  async record(id: string, vm: AgentVm, agentUrl: string): Promise<void> {
    if (vm.services.length > 0 && (await this.repo.refreshServices(id, vm.services)))
      this.logger.debug({ env: id }, 'environment services follow its VM');
    if (vm.state === 'running') {
      const moved = await this.repo.transition(id, ['creating'], 'running', {
        ports: portsOf(vm, agentUrl),
        started_at: vm.started_at ? new Date(vm.started_at) : new Date(),
        expires_at: expiryOf(vm),
      });
      if (moved) this.logger.info({ env: id }, 'environment running');
      else if (await this.repo.refreshRunning(id, portsOf(vm, agentUrl), expiryOf(vm))) {
        this.logger.info({ env: id }, 'environment ports or expiry follow its VM (resumed by its agent)');
      }
    } else if (vm.state === 'error') {
      await this.repo.transition(id, ['creating', 'running', 'paused'], 'error', {
        last_error: vm.error ?? 'the VM failed',
      });
    } else if (vm.state === 'stopped') {
      await this.repo.transition(
        id,
        ['running', 'stopping'],
        'stopped',
        vm.error ? { last_error: vm.error } : {},
      );
      // A VM that stopped before it ever ran failed to start.
      await this.repo.transition(id, ['creating'], 'error', {
        last_error: vm.error ?? 'the VM stopped before it was running',
      });
    }
  }

  /** Follows a new VM until it runs or fails (bounded by the create timeout). */
  private watch(id: string): void {
    const deadline = Date.now() + this.timeouts.createMs;
    const w = (async () => {
      while (!this.stopping && Date.now() < deadline) {
        await sleep(this.timeouts.pollMs);
        const row = await this.repo.get(id).catch(() => undefined);
        if (!row) continue;
        if (row.state !== 'creating') return;
        try {
          const agent = await this.agents.forHost(row.host_id);
          await this.record(
            id,
            await agent.json('GET', AGENT_VM_PATHS.vm(id), undefined, AgentVm),
            agent.baseUrl,
          );
        } catch (err) {
          this.logger.debug({ env: id, err: (err as Error).message }, 'waiting for the VM');
        }
      }
    })().catch((err: unknown) =>
      this.logger.warn({ env: id, err: (err as Error).message }, 'watcher failed'),
    );
    this.watchers.add(w);
    void w.finally(() => this.watchers.delete(w));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.placer.stop();
    await this.failed.stop();
    await Promise.all(this.watchers);
  }
}

/**
 * The spec of a VM started from a snapshot, as its agent and the scheduler see it: without
 * `image`. The snapshot's disk (a standalone copy) is the whole root filesystem, so the image is
 * neither booted nor needed on the host; the environment's record keeps it.
 */
export function withoutImage(spec: VmSpec): VmSpec {
  const { image: _image, ...rest } = spec;
  return rest;
}

/**
 * The ports of a VM as the record keeps them. Ports forwarded on a wildcard address are reachable
 * at the agent's own host name, so that is what the record says.
 */
export function portsOf(vm: AgentVm, agentUrl: string): PortJson[] {
  const wildcard = ['', '0.0.0.0', '::', '[::]'].includes(vm.host_address);
  const host = wildcard ? new URL(agentUrl).hostname.replace(/^\[|\]$/g, '') : vm.host_address;
  return vm.ports.map((p) => ({ port: p.port, as: p.as, host, host_port: p.host_port }));
}

/** When the agent will stop a VM for its max runtime (`expires_at` as the record keeps it). */
export function expiryOf(vm: AgentVm): Date | null {
  return vm.expires_at ? new Date(vm.expires_at) : null;
}

/**
 * Secret names the manifest's services reference (`{ "secret": name }` env values), sorted and
 * de-duplicated; `manifestServices` has checked each against `SECRET_NAME`.
 */
export function secretReferences(services: readonly ManifestService[]): string[] {
  const names = new Set(
    services.flatMap((s) => s.env.flatMap((e) => (e.secret === undefined ? [] : [e.secret]))),
  );
  return [...names].sort();
}
