import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { HostsRepo } from '../store/hosts-repo.js';
import { AgentError, fetchAgentInfo } from './agent-client.js';
import type { HostService } from './host-service.js';

/**
 * Polls every registered agent's info endpoint and records health and fresh capacity. Each `orchd`
 * sharing a database runs one; the writes are idempotent. Store outages are logged and retried on
 * the next round.
 */
export class HealthMonitor {
  private stopController = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly repo: HostsRepo,
    private readonly hosts: HostService,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  run(): void {
    const signal = this.stopController.signal;
    this.loop = (async () => {
      while (!signal.aborted) {
        await this.checkAll().catch((err: unknown) =>
          this.logger.warn({ err: (err as Error).message }, 'health check round failed'),
        );
        await sleep(this.intervalMs, undefined, { signal }).catch(() => undefined);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopController.abort();
    await this.loop;
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
          const kind = err instanceof AgentError ? err.kind : 'bad_response';
          const health =
            kind === 'unreachable' ? 'unreachable' : kind === 'unauthorized' ? 'unauthorized' : 'error';
          await this.repo.recordHealth(h.host.id, health, (err as Error).message);
        }
      }),
    );
  }
}
