import {
  checkAgentUrl,
  type Host,
  type HostCapacityHistory,
  OrchError,
  type RegisterHostRequest,
} from '@orch/protocol';
import type { Logger } from 'pino';
import type { TokenBox } from '../crypto/token-box.js';
import type { HostsRepo, HostWithToken } from '../store/hosts-repo.js';
import { AgentCallError, fetchAgentInfo } from './agent-client.js';

/** Registration, reads, cordon and removal of hosts; and the token to dial each one with. */
export class HostService {
  constructor(
    private readonly repo: HostsRepo,
    private readonly box: TokenBox,
    private readonly defaultMicrovmToken: string,
    private readonly logger: Logger,
    private readonly environments: { hostHasActive(hostId: string): Promise<boolean> },
  ) {}

  /**
   * Registers (or re-registers) a host: validates the URL before any dial, dials the agent's info
   * endpoint with the token to learn arch, topology and capacity, then stores the token sealed.
   */
  async register(req: RegisterHostRequest): Promise<{ host: Host; created: boolean }> {
    const checked = checkAgentUrl(req.agent_url);
    if (!checked.ok) throw OrchError.invalid(checked.reason, { field: 'agent_url' });
    const token = req.agent_token ?? (req.kind === 'microvm' ? this.defaultMicrovmToken : '');
    if (token === '') {
      throw OrchError.invalid(
        req.kind === 'gpu'
          ? 'agent_token is required for a gpu host (its GPU_AGENT_TOKEN)'
          : 'agent_token is missing and MICROVM_AGENT_TOKEN is not set on the orchestrator',
        { field: 'agent_token' },
      );
    }
    const info = await fetchAgentInfo(checked.url, token).catch((err: unknown) => {
      throw agentFailure(err);
    });
    if (info.kind !== req.kind) {
      throw OrchError.invalid(`the agent at ${checked.url} is a ${info.kind} host, not ${req.kind}`, {
        field: 'kind',
      });
    }
    const result = await this.repo.upsert({
      id: req.id ?? info.id,
      kind: req.kind,
      agentUrl: checked.url,
      agentTokenSealed: req.agent_token === undefined ? null : this.box.seal(req.agent_token),
      labels: req.labels,
      info,
    });
    this.logger.info(
      { host: result.host.id, created: result.created, agent_url: checked.url },
      'host registered',
    );
    return result;
  }

  async list(): Promise<Host[]> {
    return (await this.repo.list()).map((h) => h.host);
  }

  async get(id: string): Promise<Host> {
    const found = await this.repo.get(id);
    if (!found) throw OrchError.notFound('host', id);
    return found.host;
  }

  /** Host `id`'s capacity over the last `minutes` (see `HostsRepo.capacityHistory`). */
  async capacityHistory(id: string, minutes: number): Promise<HostCapacityHistory> {
    await this.get(id);
    return this.repo.capacityHistory(id, minutes);
  }

  async setState(id: string, state: 'active' | 'cordoned'): Promise<Host> {
    const host = await this.repo.setState(id, state);
    if (!host) throw OrchError.notFound('host', id);
    this.logger.info({ host: id, state }, 'host state changed');
    return host;
  }

  /** Removes a host; refused (409 conflict) while environments still hold capacity on it. */
  async remove(id: string): Promise<void> {
    if (await this.environments.hostHasActive(id)) {
      throw new OrchError(
        'conflict',
        `host ${id} still runs environments: delete them (or cordon the host and wait) first`,
        { id },
      );
    }
    if (!(await this.repo.delete(id))) throw OrchError.notFound('host', id);
    this.logger.info({ host: id }, 'host removed');
  }

  /** The token to dial a host with: its own (decrypted) or the default microvm token. */
  tokenFor(h: HostWithToken): string {
    return h.agentTokenSealed === null ? this.defaultMicrovmToken : this.box.open(h.agentTokenSealed);
  }
}

/**
 * An agent failure at registration: the caller gave the URL and token, so a refusal, redirect or
 * malformed answer is theirs to fix (`400 invalid_argument`, with `http 401` in the message for a
 * wrong token); an agent that does not answer in time is `503 unavailable`. Anything else (a store
 * error) goes to the server's one error mapper unchanged.
 */
function agentFailure(err: unknown): unknown {
  if (!(err instanceof AgentCallError) || err.kind === 'unreachable') return err;
  return OrchError.invalid(err.message, { ...err.details, agent_error: err.kind });
}
