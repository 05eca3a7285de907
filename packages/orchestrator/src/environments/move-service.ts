import {
  AGENT_VM_PATHS,
  AgentVm,
  decodeManifestInline,
  type EnvironmentState,
  type HostDrain,
  type MoveState,
  manifestServices,
  OrchError,
} from '@orch/protocol';
import { type Logger, sleep } from '@support/server';
import { toOrchError } from '../api/errors.js';
import { recordId } from '../crypto/secrets.js';
import { AgentCallError, type AgentClient, isAgentNotFound } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { EnvironmentRow, EnvironmentsRepo, HostUsage } from '../store/environments-repo.js';
import { type MoveRow, type MovesRepo, toMove } from '../store/moves-repo.js';
import { type EnvironmentService, expiryOf, portsOf, withoutImage } from './environment-service.js';
import { deleteArtifact, fetchArtifact, writeLiveArtifact } from './move-artifact.js';
import { AGENT_PAUSE_TIMEOUT_MS, recordResumed } from './pause-service.js';
import { place } from './scheduler.js';
import type { TravelService } from './travel-service.js';

/**
 * Host drain: cordon, then move each running environment to another host by live snapshot,
 * transfer and resume (the move states are drawn in `@orch/protocol` moves.ts):
 *
 * 1. `pausing`: the source agent pauses the VM (memory saved, QEMU ended); the environment reads
 *    `pausing` then `paused`. The downtime starts here.
 * 2. `transferring`: the source writes a live artifact of the paused VM (its saved state decrypted,
 *    its disk flattened; the checksums are kept in the move), and the target fetches it from the
 *    source over the agent protocol, verifying both checksums (the agents' side of this step is
 *    `move-artifact.ts`).
 * 3. `restoring`: the environment reads `resuming`; the target starts the VM under the **same id**
 *    from the artifact with the environment's request and secrets; once it runs, the record
 *    switches `host_id`, ports (URLs) and `expires_at`, records `last_move` with the downtime, and
 *    the source's paused VM and both artifacts are deleted. -> `done`.
 *
 * Any failure before the switch rolls back: the target's VM and artifact are deleted and the
 * source resumes its paused VM (`rolling_back` -> `rolled_back`, `reason` says why). A rollback
 * whose source agent does not answer stays `rolling_back`; every step is idempotent and each
 * move is leased (`MOVE_LEASE_MS`), so after an orchd restart or an agent crash the reconciler of
 * any orchd takes the move over where it stopped. A move never deletes an environment record.
 */
export class MoveService {
  private readonly driving = new Set<string>();
  private queue: Promise<void> = Promise.resolve();
  private stopping = false;

  constructor(
    private readonly moves: MovesRepo,
    private readonly repo: EnvironmentsRepo,
    private readonly envs: EnvironmentService,
    private readonly hosts: HostService,
    private readonly travel: TravelService,
    private readonly createTimeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * `POST /v1/hosts/{id}?action=drain`: cordons the host, plans a move for each running
   * environment (target by the scheduler among the other hosts with the same architecture and
   * accelerator, so the live state resumes there), starts them one after another in the
   * background, and answers the plan with what cannot move and why.
   */
  async drain(hostId: string): Promise<HostDrain> {
    const host = await this.hosts.setState(hostId, 'cordoned');
    const open = await this.moves.openEnvironmentIds();
    const planned: MoveRow[] = [];
    const unmovable: HostDrain['unmovable'] = [];
    const extra = new Map<string, HostUsage>();
    for (const env of await this.repo.listActive(hostId)) {
      if (open.has(env.id)) {
        planned.push(...(await this.moves.list({ environment_id: env.id })).filter((m) => !isFinal(m.state)));
        continue;
      }
      if (env.state !== 'running') {
        unmovable.push({
          environment_id: env.id,
          state: env.state,
          reason: `it is ${env.state}; only running environments move`,
        });
        continue;
      }
      try {
        planned.push(
          await this.repo.withPlacementLock(async (trx) => {
            const others = (await this.hosts.list()).filter((h) => h.id !== hostId && h.kind === host.kind);
            const portable = others.filter((h) => h.arch === host.arch && h.accelerator === host.accelerator);
            if (portable.length === 0) {
              throw new OrchError(
                'unavailable',
                others.length === 0
                  ? 'no other host is registered'
                  : `its live state is not portable to any other host (${host.arch}/${host.accelerator} here; ${others.map((h) => `${h.id}: ${h.arch}/${h.accelerator}`).join(', ')})`,
              );
            }
            const usage = await this.repo.usage(trx);
            for (const [id, u] of extra) usage.set(id, add(usage.get(id), u));
            // The target must have the image of every service the environment runs.
            const services = manifestServices(decodeManifestInline(env.manifest_inline));
            // The target resumes the environment's own disk: the image need not be there.
            const p = place(portable, usage, { spec: withoutImage(env.spec), services });
            if (!p.ok) throw new OrchError('unavailable', p.message);
            extra.set(p.host.id, add(extra.get(p.host.id), spec(env)));
            return this.moves.insert({
              id: recordId('mv_'),
              environment_id: env.id,
              from_host_id: hostId,
              to_host_id: p.host.id,
              artifact_id: recordId('mva_'),
            });
          }),
        );
      } catch (err) {
        unmovable.push({ environment_id: env.id, state: env.state, reason: toOrchError(err).message });
      }
    }
    for (const m of planned) this.enqueue(m);
    this.logger.info(
      { host: hostId, moves: planned.length, unmovable: unmovable.length },
      'host drain: cordoned, moves planned',
    );
    return { host: await this.hosts.get(hostId), moves: planned.map(toMove), unmovable };
  }

  async list(filter: { host_id?: string | undefined; environment_id?: string | undefined }) {
    return (await this.moves.list(filter)).map(toMove);
  }

  /** Reconciler: takes over the open moves whose lease ran out (their orchd stopped, or a step hung). */
  async takeOverStale(): Promise<number> {
    const stale = await this.moves.claimStale();
    for (const m of stale) this.enqueue(m);
    return stale.length;
  }

  /** Environments with a move under way (the reconciler leaves them alone). */
  openEnvironmentIds(): Promise<Set<string>> {
    return this.moves.openEnvironmentIds();
  }

  /** Stops taking moves (orchd stop); a move under way finishes its current agent call. */
  async stop(): Promise<void> {
    this.stopping = true;
  }

  /** Moves run one at a time (each pauses a guest: one at a time keeps each downtime short). */
  private enqueue(m: MoveRow): void {
    if (this.driving.has(m.id)) return;
    this.driving.add(m.id);
    this.queue = this.queue
      .then(() => (this.stopping ? undefined : this.drive(m.id)))
      .catch((err: unknown) => this.logger.warn({ move: m.id, err: (err as Error).message }, 'move failed'))
      .finally(() => this.driving.delete(m.id));
  }

  private async drive(id: string): Promise<void> {
    const renew = setInterval(() => void this.moves.renew(id).catch(() => undefined), 5000);
    try {
      const m = await this.moves.get(id);
      if (!m || isFinal(m.state)) return;
      if (m.state === 'rolling_back') await this.rollback(m, m.reason ?? 'rolled back');
      else await this.forward(m);
    } finally {
      clearInterval(renew);
    }
  }

  private async forward(m: MoveRow): Promise<void> {
    let state = m.state as MoveState;
    const envId = m.environment_id;
    try {
      const source = await this.envs.agents.forHost(m.from_host_id);
      const target = await this.envs.agents.forHost(m.to_host_id);
      if (state === 'planned' || state === 'pausing') {
        const env = await this.repo.get(envId);
        if (!env || !['running', 'pausing', 'paused'].includes(env.state) || env.host_id !== m.from_host_id)
          throw new Error(
            `the environment is ${env?.state ?? 'gone'} on ${env?.host_id ?? '-'}; nothing to move`,
          );
        const pausedAt = m.paused_at ?? new Date();
        await this.moves.update(m.id, { state: 'pausing', paused_at: pausedAt });
        m.paused_at = pausedAt;
        await this.repo.transition(envId, ['running'], 'pausing');
        const vm = await source.json('GET', AGENT_VM_PATHS.vm(envId), undefined, AgentVm);
        if (vm.state === 'running')
          await source.json('POST', AGENT_VM_PATHS.pause(envId), undefined, AgentVm, {
            timeoutMs: AGENT_PAUSE_TIMEOUT_MS,
          });
        else if (vm.state !== 'paused') throw new Error(`the VM is ${vm.state} on ${m.from_host_id}`);
        await this.repo.transition(envId, ['pausing'], 'paused', { expires_at: null, ports: [] });
        state = 'transferring';
        await this.moves.update(m.id, { state });
      }
      if (state === 'transferring') {
        const artifact = await writeLiveArtifact(m, source, target);
        await this.moves.update(m.id, { digest: artifact.digest, state_digest: artifact.state_digest });
        await fetchArtifact(this.travel, m, artifact);
        state = 'restoring';
        await this.moves.update(m.id, { state });
      }
      if (state === 'restoring') {
        await this.repo.transition(envId, ['paused'], 'resuming');
        const env = await this.envs.row(envId);
        const request = this.envs.vmRequest(env, this.envs.secretsOf(env), m.artifact_id);
        try {
          await target.json('POST', AGENT_VM_PATHS.vms, request, AgentVm);
        } catch (err) {
          if (!(err instanceof AgentCallError && err.code === 'conflict')) throw err;
        }
        const vm = await this.waitRunning(target, envId);
        const downtime = Date.now() - (m.paused_at ?? new Date()).getTime();
        const switched = await this.repo.switchHost(envId, m.from_host_id, m.to_host_id, {
          ports: portsOf(vm, target.baseUrl),
          expires_at: expiryOf(vm),
          last_move: {
            from_host_id: m.from_host_id,
            to_host_id: m.to_host_id,
            downtime_ms: downtime,
            at: new Date().toISOString(),
          },
        });
        if (!switched) throw new Error('the environment changed during the move');
        await this.moves.update(m.id, { state: 'done', downtime_ms: downtime, reason: null });
        this.logger.info(
          { env: envId, from: m.from_host_id, to: m.to_host_id, downtime_ms: downtime },
          'environment moved',
        );
        // Best effort: a source that does not answer keeps a paused VM that the reconciler
        // deletes later (a VM on a host its environment is not on is an orphan).
        await source.json('DELETE', AGENT_VM_PATHS.vm(envId)).catch(() => undefined);
        await deleteArtifact(source, m).catch(() => undefined);
        await deleteArtifact(target, m).catch(() => undefined);
      }
    } catch (err) {
      const reason = toOrchError(err).message;
      this.logger.warn({ env: envId, move: m.id, state, err: reason }, 'move failed; rolling back');
      await this.rollback(m, `${state}: ${reason}`);
    }
  }

  /** The target VM once it runs (a failure or the create timeout is an error). */
  private async waitRunning(target: AgentClient, envId: string): Promise<AgentVm> {
    const deadline = Date.now() + this.createTimeoutMs;
    for (;;) {
      const vm = await target.json('GET', AGENT_VM_PATHS.vm(envId), undefined, AgentVm);
      if (vm.state === 'running') return vm;
      if (vm.state !== 'creating') throw new Error(`the VM is ${vm.state} on the target: ${vm.error ?? ''}`);
      if (Date.now() > deadline) throw new Error('the VM did not start on the target in time');
      await sleep(100);
    }
  }

  /**
   * Undoes a move that did not switch: the target's VM and artifact go, the source resumes its
   * paused VM, the environment reads `running` on its source again. The source agent not
   * answering leaves the move `rolling_back` (retried when its lease runs out).
   */
  private async rollback(m: MoveRow, reason: string): Promise<void> {
    await this.moves.update(m.id, { state: 'rolling_back', reason });
    const envId = m.environment_id;
    try {
      const env = await this.repo.get(envId);
      if (env?.host_id === m.to_host_id) {
        // The switch happened (an orchd died right after it): the move is done.
        await this.moves.update(m.id, { state: 'done', reason: null });
        return;
      }
      const target = await this.envs.agents.forHost(m.to_host_id).catch(() => undefined);
      if (target) {
        await target.json('DELETE', AGENT_VM_PATHS.vm(envId)).catch(() => undefined);
        await deleteArtifact(target, m).catch(() => undefined);
      }
      const source = await this.envs.agents.forHost(m.from_host_id);
      let vm: AgentVm;
      try {
        vm = await source.json('GET', AGENT_VM_PATHS.vm(envId), undefined, AgentVm);
      } catch (err) {
        if (!isAgentNotFound(err)) throw err;
        await this.repo.transition(envId, [(env?.state ?? 'paused') as EnvironmentState], 'error', {
          last_error: 'the VM is gone from its host (during a move)',
        });
        await this.moves.update(m.id, { state: 'rolled_back', reason: `${reason}; the source VM is gone` });
        return;
      }
      if (vm.state === 'paused')
        vm = await source.json('POST', AGENT_VM_PATHS.resume(envId), undefined, AgentVm, {
          timeoutMs: AGENT_PAUSE_TIMEOUT_MS,
        });
      if (vm.state === 'error' || vm.state === 'stopped') {
        // The source lost the VM (its agent crashed before the state was saved): the record stays
        // and says why; nothing is left to roll back to.
        const why = vm.error ?? `the VM is ${vm.state}`;
        await this.repo.transition(envId, [(env?.state ?? 'pausing') as EnvironmentState], 'error', {
          last_error: `lost during a move from ${m.from_host_id}: ${why}`,
        });
        await this.moves.update(m.id, {
          state: 'rolled_back',
          reason: `${reason}; the source VM failed: ${why}`,
        });
        return;
      }
      if (vm.state !== 'running') throw new Error(`the source VM is ${vm.state}`);
      await this.repo.transition(envId, ['paused'], 'resuming');
      await recordResumed(this.repo, envId, vm, source.baseUrl);
      await deleteArtifact(source, m);
      await this.moves.update(m.id, { state: 'rolled_back', reason });
      this.logger.warn(
        { env: envId, move: m.id, reason },
        'move rolled back; the environment runs on its source',
      );
    } catch (err) {
      const why = toOrchError(err).message;
      this.logger.warn({ env: envId, move: m.id, err: why }, 'rollback waits for the source host');
      await this.moves.update(m.id, { state: 'rolling_back', reason }).catch(() => undefined);
    }
  }
}

function isFinal(state: string): boolean {
  return state === 'done' || state === 'rolled_back';
}

function spec(env: EnvironmentRow): HostUsage {
  return { cpus: env.spec.cpus, ram_mb: env.spec.ram_mb, disk_gb: env.spec.storage_gb, gpus: {} };
}

function add(a: HostUsage | undefined, b: HostUsage): HostUsage {
  return {
    cpus: (a?.cpus ?? 0) + b.cpus,
    ram_mb: (a?.ram_mb ?? 0) + b.ram_mb,
    disk_gb: (a?.disk_gb ?? 0) + b.disk_gb,
    gpus: a?.gpus ?? {},
  };
}
