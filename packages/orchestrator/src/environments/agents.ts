import { ApiError } from '../api/errors.js';
import { AgentClient, AgentError } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { HostsRepo } from '../store/hosts-repo.js';

/** Agent clients by host id, with each host's own (decrypted) token. */
export class Agents {
  constructor(
    private readonly hostsRepo: HostsRepo,
    private readonly hosts: HostService,
    private readonly timeoutMs: number,
  ) {}

  async forHost(hostId: string): Promise<AgentClient> {
    const h = await this.hostsRepo.get(hostId);
    if (!h) throw ApiError.unavailable(`host ${hostId} is no longer registered`);
    return new AgentClient(h.host.agent_url, this.hosts.tokenFor(h), this.timeoutMs);
  }
}

/** Maps an agent failure to the API: an unreachable, refusing or failing agent is `unavailable`. */
export function agentApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof AgentError) {
    if (err.kind === 'rejected') return ApiError.invalid(err.message);
    if (err.kind === 'not_found') return new ApiError('not_found', err.message);
    return ApiError.unavailable(err.message, { agent_error: err.kind });
  }
  return new ApiError('internal', 'internal error');
}
