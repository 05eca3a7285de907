import {
  AGENT_VM_PATHS,
  AgentVm,
  type Environment,
  type EnvironmentState,
  ORCHD_WAIT_SECONDS,
  OrchError,
} from '@orch/protocol';
import type { Logger } from '@support/server';
import { toOrchError } from '../api/errors.js';
import { isAgentNotFound } from '../hosts/agent-client.js';
import type { EnvironmentsRepo } from '../store/environments-repo.js';
import { type EnvironmentService, expiryOf, portsOf, withoutImage } from './environment-service.js';
import { place } from './scheduler.js';

/** How long orchd waits for an agent to pause or resume a VM (its memory is written or read). */
export const AGENT_PAUSE_TIMEOUT_MS = ORCHD_WAIT_SECONDS.pauseResume * 1000;

/**
 * Pause and resume in place (`POST /v1/environments/{id}?action=pause|resume`), on the
 * environment's own host. Pause: `running -> pausing`, the agent saves the VM's memory and ends
 * its QEMU, `-> paused` (CPU and RAM are free again; `expires_at` is null). Resume: the CPU and RAM
 * are reserved again under the placement lock (`paused -> resuming`; refused with the scheduler's
 * reason when the host has no room now), the agent restores the VM, `-> running` with its ports and
 * new `expires_at`. Max runtime is the agent's: running time counted from the first start, paused
 * time excluded. Any other state is a `409 conflict`. When the agent call fails, the record
 * follows what the agent says the VM is ({@link settle}); the reconciler finishes what an orchd
 * restart interrupted.
 */
export class PauseService {
  constructor(
    private readonly repo: EnvironmentsRepo,
    private readonly envs: EnvironmentService,
    private readonly logger: Logger,
  ) {}

  async pause(id: string): Promise<Environment> {
    const row = await this.envs.row(id);
    if (!(await this.repo.transition(id, ['running'], 'pausing'))) {
      throw conflict(id, 'paused', 'running', (await this.repo.get(id))?.state ?? row.state);
    }
    const agent = await this.envs.agents.forHost(row.host_id);
    try {
      await agent.json('POST', AGENT_VM_PATHS.pause(id), undefined, AgentVm, {
        timeoutMs: AGENT_PAUSE_TIMEOUT_MS,
      });
    } catch (err) {
      await this.settle(id);
      throw toOrchError(err);
    }
    await this.repo.transition(id, ['pausing'], 'paused', { expires_at: null, ports: [] });
    this.logger.info({ env: id }, 'environment paused');
    return this.envs.get(id);
  }

  async resume(id: string): Promise<Environment> {
    const row = await this.envs.row(id);
    // Under its host's row lock, like a create's placement there (Placer): never overbooked.
    await this.repo.withHostLocks([row.host_id], async (_trx, hosts, usage) => {
      const current = await this.repo.get(id);
      if (current?.state !== 'paused') throw conflict(id, 'resumed', 'paused', current?.state ?? row.state);
      // In place: the VM's disk is on its host already (an environment restored or moved there
      // may run on a host without its image).
      const placement = place(hosts, usage, {
        spec: withoutImage(row.spec),
        onHost: row.host_id,
      });
      if (!placement.ok) {
        throw new OrchError(placement.code, `cannot resume ${id} on its host now: ${placement.message}`);
      }
      if (!(await this.repo.transition(id, ['paused'], 'resuming'))) {
        throw conflict(id, 'resumed', 'paused', (await this.repo.get(id))?.state ?? row.state);
      }
    });
    const agent = await this.envs.agents.forHost(row.host_id);
    let vm: AgentVm;
    try {
      vm = await agent.json('POST', AGENT_VM_PATHS.resume(id), undefined, AgentVm, {
        timeoutMs: AGENT_PAUSE_TIMEOUT_MS,
      });
    } catch (err) {
      await this.settle(id);
      throw toOrchError(err);
    }
    await recordResumed(this.repo, id, vm, agent.baseUrl);
    this.logger.info({ env: id }, 'environment resumed');
    return this.envs.get(id);
  }

  /**
   * After a failed or interrupted pause or resume (`pausing`/`resuming`), the record follows the
   * agent: its VM running -> `running`, paused -> `paused`, failed, stopped or gone -> `error`; a
   * VM still pausing or resuming on the agent, or an agent that does not answer, leaves the record
   * as it is (the reconciler asks again).
   */
  async settle(id: string): Promise<void> {
    const row = await this.repo.get(id);
    if (!row || (row.state !== 'pausing' && row.state !== 'resuming')) return;
    const from: EnvironmentState[] = [row.state];
    let vm: AgentVm;
    const agent = await this.envs.agents.forHost(row.host_id);
    try {
      vm = await agent.json('GET', AGENT_VM_PATHS.vm(id), undefined, AgentVm);
    } catch (err) {
      if (isAgentNotFound(err)) {
        await this.repo.transition(id, from, 'error', { last_error: 'the VM is gone from its host' });
      }
      return;
    }
    if (vm.state === 'running') await recordResumed(this.repo, id, vm, agent.baseUrl);
    else if (vm.state === 'paused')
      await this.repo.transition(id, from, 'paused', { expires_at: null, ports: [] });
    else if (vm.state === 'error' || vm.state === 'stopped')
      await this.repo.transition(id, from, 'error', { last_error: vm.error ?? `the VM is ${vm.state}` });
  }
}

/**
 * A `pausing` or `resuming` environment whose VM runs (again) on the agent at `agentUrl`:
 * `running`, with the VM's ports and `expires_at`, and no error. Also a move's rollback, whose
 * source resumed the VM.
 */
export async function recordResumed(
  repo: EnvironmentsRepo,
  id: string,
  vm: AgentVm,
  agentUrl: string,
): Promise<void> {
  await repo.transition(id, ['pausing', 'resuming'], 'running', {
    ports: portsOf(vm, agentUrl),
    expires_at: expiryOf(vm),
    last_error: null,
  });
}

/** `409 conflict`: the environment is not in the one state the action starts from. */
function conflict(id: string, verb: string, from: string, state: string): OrchError {
  return new OrchError(
    'conflict',
    `environment ${id} is ${state}, not ${from}: only a ${from} environment can be ${verb}`,
    { state },
  );
}
