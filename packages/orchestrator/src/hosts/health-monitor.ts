import type { Logger } from 'pino';
import { Periodic } from '../periodic.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import { AgentCallError, fetchAgentInfo } from './agent-client.js';
import type { HostService } from './host-service.js';

/**
 * Polls every registered agent's info endpoint and records health and fresh capacity. Each `orchd`
 * sharing a database runs one; the writes are idempotent. Store outages are logged and retried on
 * the next round.
 */
export class HealthMonitor {
  private readonly periodic: Periodic;

  constructor(
    private readonly repo: HostsRepo,
    private readonly hosts: HostService,
    intervalMs: number,
    logger: Logger,
  ) {
    this.periodic = new Periodic('health check', intervalMs, () => this.checkAll(), logger);
  }

  run(): void {
    this.periodic.run();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One round over all hosts, in parallel. */
  async checkAll(): Promise<void> {
    const all = await this.repo.list();
    await Promise.all(
      all.map(async (h) => {
        try {
          const info = await fetchAgentInfo(h.host.agent_url, this.hosts.tokenFor(h));
          await this.repo.recordHealth(h.host.id, 'healthy', null, info);
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
