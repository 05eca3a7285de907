import {
  AGENT_VM_PATHS,
  type AgentLogQuery,
  type EnvironmentState,
  LOG_OFFSET_HEADER,
  LOG_SIZE_HEADER,
  LOG_WINDOW_BYTES,
  OrchError,
} from '@orch/protocol';
import { sleep } from '@support/server';
import { isAgentNotFound } from '../hosts/agent-client.js';
import type { EnvironmentRow } from '../store/environments-repo.js';
import type { Agents } from './agents.js';
import type { EnvironmentService } from './environment-service.js';

/** One window of a log: its bytes, where they start, and the log's whole size then. */
export interface LogWindow {
  readonly bytes: Uint8Array;
  readonly offset: number;
  readonly size: number;
}

/** States whose VM may still be writing: a follower keeps reading while the environment is in one. */
const WRITING: readonly EnvironmentState[] = ['creating', 'running', 'pausing', 'paused', 'resuming'];

/**
 * Environment logs (`GET /v1/environments/{id}/logs`): the startup script's output, or with
 * `service` one service's output (kept rotated in the guest: the agent's README, "Services"), read
 * from the environment's agent in windows of at most 1 MiB (see `logs.ts` of @orch/protocol). A follower
 * polls the agent every `pollMs` for bytes past what it has sent, and ends once the environment has
 * left the states in which its VM runs (after a last read) or the caller goes away. The log lives
 * with the VM: once the VM is gone (stopped), asking for it is a `409 conflict` saying so.
 */
export class LogService {
  constructor(
    private readonly envs: EnvironmentService,
    private readonly agents: Agents,
    private readonly pollMs = 500,
  ) {}

  /** The window of environment `id`'s log that `query` names. */
  async window(id: string, query: AgentLogQuery): Promise<LogWindow> {
    return this.read(await this.envs.row(id), query);
  }

  /**
   * A stream of environment `id`'s log from the window `query` names on (starting at byte
   * `offset`): the bytes there, then new ones as the VM writes them, until the environment stops or
   * `signal` aborts.
   */
  async follow(
    id: string,
    query: AgentLogQuery,
    signal: AbortSignal,
  ): Promise<{ stream: ReadableStream<Uint8Array>; offset: number }> {
    const first = await this.window(id, query);
    let offset = first.offset;
    let pending: Uint8Array | undefined = first.bytes;
    let lastRound = false;
    const gone = new AbortController();
    signal.addEventListener('abort', () => gone.abort(), { once: true });
    const stream = new ReadableStream<Uint8Array>({
      cancel: () => gone.abort(),
      pull: async (controller) => {
        for (;;) {
          if (pending && pending.byteLength > 0) {
            const bytes: Uint8Array = pending;
            pending = undefined;
            offset += bytes.byteLength;
            controller.enqueue(bytes);
            return;
          }
          if (lastRound || gone.signal.aborted) return controller.close();
          try {
            const row = await this.envs.row(id);
            // Read once more after the VM stopped writing (its agent may already have deleted it).
            if (!WRITING.includes(row.state as EnvironmentState)) lastRound = true;
            const next = await this.read(row, {
              ...(query.service ? { service: query.service } : {}),
              offset,
            });
            // A service log rotates: bytes it dropped before they were read are skipped.
            offset = next.offset;
            pending = next.bytes;
            if (pending.byteLength === LOG_WINDOW_BYTES || lastRound) continue;
            if (pending.byteLength === 0) await sleep(this.pollMs, gone.signal);
          } catch {
            // The VM went away (or its agent did): what was sent is all there is.
            return controller.close();
          }
        }
      },
    });
    return { stream, offset: first.offset };
  }

  private async read(row: EnvironmentRow, query: AgentLogQuery): Promise<LogWindow> {
    if (query.service !== undefined && !row.services.some((s) => s.name === query.service))
      throw OrchError.notFound('service', query.service);
    if (row.state === 'stopped')
      throw new OrchError('conflict', `environment ${row.id} is stopped: its log went with its VM`, {
        state: row.state,
      });
    const agent = await this.agents.forHost(row.host_id);
    const search = new URLSearchParams(
      Object.entries(query).flatMap(([k, v]) => (v === undefined ? [] : [[k, String(v)]])),
    );
    let answer: { bytes: Buffer; headers: Headers };
    try {
      answer = await agent.bytes(`${AGENT_VM_PATHS.log(row.id)}?${search}`, LOG_WINDOW_BYTES);
    } catch (err) {
      // Not on its agent yet (being placed) or no longer: no output so far.
      if (isAgentNotFound(err) && row.state !== 'running')
        return { bytes: new Uint8Array(0), offset: 0, size: 0 };
      throw err;
    }
    const { bytes, headers } = answer;
    return {
      bytes,
      offset: Number(headers.get(LOG_OFFSET_HEADER) ?? 0),
      size: Number(headers.get(LOG_SIZE_HEADER) ?? bytes.byteLength),
    };
  }
}
