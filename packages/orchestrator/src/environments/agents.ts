import { OrchError } from '@orch/protocol';
import { AgentClient } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { OrchdMetrics } from '../metrics.js';
import type { HostsRepo } from '../store/hosts-repo.js';

/** Agent clients by host id, with each host's own (decrypted) token. */
export class Agents {
  constructor(
    private readonly hostsRepo: HostsRepo,
    private readonly hosts: HostService,
    private readonly timeoutMs: number,
    private readonly metrics?: OrchdMetrics,
  ) {}

  /**
   * A host's agent URL and token, for another agent to fetch an artifact from it (the token goes to
   * that agent only, in the body of one fetch request over the agent protocol; never to a client).
   */
  async credentials(hostId: string): Promise<{ url: string; token: string }> {
    const h = await this.hostsRepo.get(hostId);
    if (!h) throw OrchError.unavailable(`host ${hostId} is no longer registered`);
    return { url: h.host.agent_url, token: this.hosts.tokenFor(h) };
  }

  async forHost(hostId: string): Promise<AgentClient> {
    const h = await this.hostsRepo.get(hostId);
    if (!h) throw OrchError.unavailable(`host ${hostId} is no longer registered`);
    return new AgentClient(
      h.host.agent_url,
      this.hosts.tokenFor(h),
      this.timeoutMs,
      this.metrics?.agentObserver(h.host.id),
    );
  }
}
