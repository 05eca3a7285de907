import { AGENT_VM_PATHS, type AgentVm, AgentVmList, type EnvironmentState } from '@orch/protocol';
import { type Logger, Periodic, type Service } from '@support/server';
import type { OrchdMetrics } from '../metrics.js';
import { ACTIVE_STATES, type EnvironmentsRepo } from '../store/environments-repo.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import type { IdempotencyRepo } from '../store/idempotency-repo.js';
import { type EnvironmentService, expiryOf } from './environment-service.js';
import type { ExportService } from './export-service.js';
import type { MoveService } from './move-service.js';
import type { PauseService } from './pause-service.js';

/** A pause or resume that has not settled after this long was interrupted (an orchd restart). */
const PAUSE_SETTLE_MS = 600_000;

import type { SnapshotService } from './snapshot-service.js';

/** Largest VM list read from an agent (about 30,000 VMs). */
const VM_LIST_BYTES = 16 << 20;

/**
 * Brings records and agents into agreement, on start and then every interval (every orchd runs
 * one; all its writes are conditional transitions, so concurrent reconcilers agree):
 *
 * - `creating`: the agent's VM running → `running`; failed → `error`; missing, or creating for
 *   longer than the create timeout → `error` (and the VM, if any, is deleted).
 * - `running`: past `expires_at` (max runtime) → stopped on the agent → `stopped`; VM missing →
 *   `error` ("the VM is gone"); VM failed or stopped on its own → `error` / `stopped`.
 * - `stopping`: delete again until the agent confirms → `stopped`.
 * - `pausing`/`resuming` for longer than the agent's pause timeout (an orchd restart interrupted
 *   the request): the record follows the agent's VM (`PauseService.settle`).
 * - `paused`: VM missing → `error`; its CPU and RAM are not counted (`EnvironmentsRepo.usage`).
 * - A VM on an agent with no active environment (an orphan) is deleted.
 * - Snapshots past `retention_until` are deleted; idempotency keys past their retention too.
 *
 * A host that cannot be reached is skipped; its environments keep their state until it answers.
 */
export class Reconciler implements Service {
  readonly name: string;
  private readonly periodic: Periodic;

  constructor(
    private readonly envs: EnvironmentService,
    private readonly pauses: PauseService,
    private readonly snapshots: SnapshotService,
    private readonly repo: EnvironmentsRepo,
    private readonly hostsRepo: HostsRepo,
    intervalMs: number,
    private readonly createTimeoutMs: number,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
    /** Moves (drain) and exports the reconciler takes over when their orchd stopped. */
    private readonly travel?: { readonly moves: MoveService; readonly exports: ExportService },
    /** Idempotency keys of creates, pruned once past their retention. */
    private readonly keys?: { readonly repo: IdempotencyRepo; readonly retentionMs: number },
  ) {
    this.name = 'reconcile';
    this.periodic = new Periodic({
      name: this.name,
      intervalMs,
      log: logger,
      tick: async ({ now }) => {
        try {
          await this.once(now);
          this.metrics?.reconcilerRuns.inc({ outcome: 'ok' });
        } catch (err) {
          this.metrics?.reconcilerRuns.inc({ outcome: 'failed' });
          throw err;
        }
      },
    });
  }

  /** Runs a round now and then every interval, until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return this.periodic.run(signal);
  }

  /** One round over every host. */
  async once(now = new Date()): Promise<void> {
    // Environments being moved belong to their move (which may leave a VM on two hosts a moment).
    const moving = (await this.travel?.moves.openEnvironmentIds()) ?? new Set<string>();
    const active = (await this.repo.listActive()).filter((e) => !moving.has(e.id));
    const hosts = await this.hostsRepo.list();
    await Promise.all(
      hosts.map(async ({ host }) => {
        let vms: AgentVm[];
        try {
          vms = (
            await (
              await this.envs.agents.forHost(host.id)
            ).json('GET', AGENT_VM_PATHS.vms, undefined, AgentVmList, { maxBytes: VM_LIST_BYTES })
          ).vms;
        } catch (err) {
          this.logger.debug({ host: host.id, err: (err as Error).message }, 'reconcile: host not reachable');
          return;
        }
        const byId = new Map(vms.map((v) => [v.id, v]));
        const mine = active.filter((e) => e.host_id === host.id);
        const activeIds = new Set(mine.map((e) => e.id));
        for (const env of mine) {
          const vm = byId.get(env.id);
          // Max runtime is the agent's clock (running time; it moves when the agent suspended and
          // resumed the VM around a restart): its VM's expiry wins, and a VM the agent holds
          // paused or is resuming is not running out.
          const heldByAgent = vm && ['pausing', 'paused', 'resuming'].includes(vm.state);
          const expires = vm?.state === 'running' ? expiryOf(vm) : env.expires_at;
          try {
            if (
              env.state === 'stopping' ||
              (env.state === 'running' && !heldByAgent && expires && expires <= now)
            ) {
              this.fixed(env.state === 'running' ? 'stop_expired' : 'retry_stop');
              await this.envs.stopOnAgent(
                env,
                env.state === 'running' ? 'max_runtime_seconds ran out' : null,
              );
            } else if (
              (env.state === 'pausing' || env.state === 'resuming') &&
              now.getTime() - env.updated_at.getTime() > PAUSE_SETTLE_MS
            ) {
              await this.pauses.settle(env.id);
            } else if (!vm) {
              // Re-read: a move may have switched it to another host since the list was read.
              const fresh = await this.repo.get(env.id);
              if (fresh?.host_id !== host.id || moving.has(env.id)) continue;
              if (env.state === 'running' || now.getTime() - env.created_at.getTime() > 30_000) {
                await this.repo.transition(env.id, [env.state as EnvironmentState], 'error', {
                  last_error: 'the VM is gone from its host',
                });
                this.fixed('vm_gone');
                this.logger.warn({ env: env.id }, 'VM is gone');
              }
            } else if (
              env.state === 'creating' &&
              vm.state === 'creating' &&
              now.getTime() - env.created_at.getTime() > this.createTimeoutMs
            ) {
              // creating -> error (drawn in @orch/protocol), then the VM is deleted on its agent.
              this.fixed('create_timeout');
              await this.repo.transition(env.id, ['creating'], 'error', {
                last_error: `the VM did not start within ${this.createTimeoutMs / 1000} s`,
              });
              await (await this.envs.agents.forHost(host.id))
                .json('DELETE', AGENT_VM_PATHS.vm(env.id))
                .catch(() => undefined);
            } else {
              await this.envs.record(env.id, vm, host.agent_url);
            }
          } catch (err) {
            this.logger.warn(
              { env: env.id, err: (err as Error).message },
              'reconcile: environment not settled',
            );
          }
        }
        for (const vm of vms) {
          if (activeIds.has(vm.id) || moving.has(vm.id) || vm.state === 'stopped') continue;
          // Re-read: the environment may have been created after this round listed the active ones.
          const row = await this.repo.get(vm.id);
          // A VM whose environment is active on another host was left behind by a move.
          if (row && ACTIVE_STATES.includes(row.state as EnvironmentState) && row.host_id === host.id)
            continue;
          this.fixed('orphan_deleted');
          this.logger.warn({ host: host.id, vm: vm.id }, 'deleting an orphaned VM');
          const agent = await this.envs.agents.forHost(host.id);
          await agent.json('DELETE', AGENT_VM_PATHS.vm(vm.id)).catch(() => undefined);
        }
      }),
    );
    if (this.travel) {
      const taken = await this.travel.moves.takeOverStale();
      if (taken > 0) this.fixed('move_taken_over');
      await this.travel.exports.retryStale(now);
    }
    if (this.keys) {
      const pruned = await this.keys.repo.prune(new Date(now.getTime() - this.keys.retentionMs));
      if (pruned > 0) this.logger.debug({ pruned }, 'idempotency keys past their retention pruned');
    }
    const collected = await this.snapshots.collectGarbage(now);
    if (collected > 0) this.metrics?.reconcilerFixes.inc({ action: 'snapshot_expired' }, collected);
  }

  private fixed(action: string): void {
    this.metrics?.reconcilerFixes.inc({ action });
  }
}
