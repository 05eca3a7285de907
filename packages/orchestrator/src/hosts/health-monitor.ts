import { gpuHealthDetail } from '@orch/protocol';
import { type Logger, Periodic, type Service } from '@support/server';
import type { HostsRepo } from '../store/hosts-repo.js';
import { AgentCallError, fetchAgentInfo } from './agent-client.js';
import type { HostService } from './host-service.js';

/**
 * Polls every registered agent's info endpoint and records health and fresh capacity. Each `orchd`
 * sharing a database runs one; the writes are idempotent. Store outages are logged and retried on
 * the next round.
 */
export class HealthMonitor implements Service {
  readonly name: string;
  private readonly periodic: Periodic;

  constructor(
    private readonly repo: HostsRepo,
    private readonly hosts: HostService,
    intervalMs: number,
    logger: Logger,
  ) {
    this.name = 'health check';
    this.periodic = new Periodic({ name: this.name, intervalMs, log: logger, tick: () => this.checkAll() });
  }

  /** Runs a round now and then every interval, until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return this.periodic.run(signal);
  }

  /** One round over all hosts, in parallel. */
  async checkAll(): Promise<void> {
    const all = await this.repo.list();
    await Promise.all(
      all.map(async (h) => {
        try {
          const info = await fetchAgentInfo(h.host.agent_url, this.hosts.tokenFor(h));
          // A GPU host whose driver is missing or whose nvidia-smi fails is reachable, and says so.
          await this.repo.recordHealth(h.host.id, 'healthy', gpuHealthDetail(info.gpu_status), info);
        } catch (err) {
          // Only agent failures are a host's health; a store error is the round's (logged, retried).
          if (!(err instanceof AgentCallError)) throw err;
          const health =
            err.kind === 'unreachable'
              ? 'unreachable'
              : err.kind === 'unauthorized'
                ? 'unauthorized'
                : 'error';
          await this.repo.recordHealth(h.host.id, health, err.message);
        }
      }),
    );
  }
}
