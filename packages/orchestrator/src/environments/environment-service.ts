import { randomBytes } from 'node:crypto';
import {
  AGENT_VM_PATHS,
  AgentVm,
  type CreateEnvironmentRequest,
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
import type { PortJson } from '../store/schema.js';
import type { SnapshotRow } from '../store/snapshots-repo.js';
import type { Agents } from './agents.js';
import { type Placement, type PlacementRequest, place } from './scheduler.js';
import type { TravelService } from './travel-service.js';

/** Largest exec answer: two streams of EXEC_OUTPUT_LIMIT bytes, base64, plus the envelope. */
const EXEC_ANSWER_BYTES = Math.ceil((2 * EXEC_OUTPUT_LIMIT * 4) / 3) + MAX_ANSWER_BYTES;

export interface EnvironmentTimeouts {
  /** How long a VM may stay `creating` before the environment is `error`. */
  readonly createMs: number;
  /** Polling interval while waiting for a VM to come up. */
  readonly pollMs: number;
}

/**
 * Environments: placement, creation on the agent, lifecycle, exec. Creation is two steps: the
 * record is written with its capacity reserved (under the placement lock), then the agent is asked
 * to create the VM; a watcher then follows the VM to `running` or `error`. The reconciler covers
 * everything a watcher cannot (an orchd restart, a crashed VM, max runtime).
 */
export class EnvironmentService {
  private readonly watchers = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    private readonly repo: EnvironmentsRepo,
    private readonly hosts: HostService,
    readonly agents: Agents,
    private readonly box: TokenBox,
    private readonly timeouts: EnvironmentTimeouts,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
  ) {}

  /**
   * Creates an environment. `from` restores a snapshot (a new VM on the snapshot's host, with the
   * original environment's request); `seed` boots a build artifact's disk (from-build).
   */
  async create(
    req: CreateEnvironmentRequest,
    opts: { restore?: SnapshotRow; seed?: SnapshotRow } = {},
  ): Promise<Environment> {
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
    const secrets: Record<string, string> = Object.fromEntries([
      ...needed.map((n) => [n, given.get(n)!] as const),
      [VM_SECRET_NAME, randomBytes(32).toString('base64url')] as const,
    ]);
    const snapshot = opts.restore ?? opts.seed;
    const id = recordId('env_');
    const row = await this.repo.withPlacementLock(async (trx) => {
      const hosts = await this.hosts.list();
      const usage = await this.repo.usage(trx);
      let placement = place(hosts, usage, {
        spec: req.spec,
        services,
        ...(snapshot ? { onHost: snapshot.host_id } : {}),
      });
      // The snapshot's host is cordoned, unhealthy, full or gone: another host fetches the artifact.
      if (!placement.ok && snapshot && this.travel)
        placement = this.elsewhere(hosts, usage, { spec: req.spec, services }, snapshot, placement);
      this.metrics?.placements.inc({ outcome: placement.ok ? 'placed' : placement.reason });
      if (!placement.ok) throw new OrchError(placement.code, placement.message);
      return this.repo.insert(
        {
          id,
          task_id: req.task_id,
          host_id: placement.host.id,
          spec: req.spec,
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
        },
        trx,
      );
    });
    this.logger.info({ env: row.id, host: row.host_id, task: row.task_id }, 'environment placed');
    try {
      if (snapshot && row.host_id !== snapshot.host_id) await this.travel!.ensureOn(snapshot, row.host_id);
      const agent = await this.agents.forHost(row.host_id);
      const vm = await agent.json('POST', AGENT_VM_PATHS.vms, this.vmRequest(row, secrets), AgentVm);
      await this.record(row.id, vm, agent.baseUrl);
    } catch (err) {
      const apiError = toOrchError(err);
      await this.repo.transition(row.id, ['creating'], 'error', { last_error: apiError.message });
      this.logger.warn({ env: row.id, err: apiError.message }, 'environment creation failed');
      throw apiError;
    }
    this.metrics?.environmentsCreated.inc({
      origin: opts.restore ? 'restore' : opts.seed ? 'build' : 'request',
    });
    this.watch(row.id);
    return toEnvironment((await this.repo.get(row.id))!);
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
    hosts: Host[],
    usage: Map<string, HostUsage>,
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

  /** The agent's create request for an environment row. */
  vmRequest(row: EnvironmentRow, secrets: Record<string, string>) {
    return {
      id: row.id,
      spec: row.spec,
      manifest_inline: row.manifest_inline,
      startup_script: row.startup_script,
      secrets,
      expose: row.expose,
      ...(row.seed_snapshot_id ? { seed_snapshot_id: row.seed_snapshot_id } : {}),
      ...(row.restored_from_snapshot_id ? { restore_snapshot_id: row.restored_from_snapshot_id } : {}),
    };
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
    await Promise.all(this.watchers);
  }
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
