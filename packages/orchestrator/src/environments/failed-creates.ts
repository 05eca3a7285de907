import { AGENT_VM_PATHS } from '@orch/protocol';
import { sleep } from '@support/server';
import type { Logger } from 'pino';
import type { EnvironmentRow, EnvironmentsRepo } from '../store/environments-repo.js';
import type { IdempotencyRepo } from '../store/idempotency-repo.js';
import type { Agents } from './agents.js';
import type { CreateKey } from './create-key.js';

/**
 * Undoes creates that answer an error after their record was written (the agent refused, failed or
 * timed out, possibly after making the VM): the environment goes to `error` (its capacity released;
 * from `running` too, should a watcher or reconciler have seen its VM come up meanwhile, so nothing
 * resurrects it), its idempotency key is given up (a retry creates afresh), and its VM, if the agent
 * made one, is deleted. {@link undo} tries once before the error is answered; what failed (store or
 * agent unreachable) is retried in the background with backoff, for at most the create timeout
 * (after that the reconciler deletes a VM whose environment is `error`, as an orphan).
 */
export class FailedCreates {
  private readonly pending = new Set<Promise<void>>();
  private readonly life = new AbortController();

  constructor(
    private readonly repo: EnvironmentsRepo,
    private readonly keys: IdempotencyRepo,
    private readonly agents: Agents,
    private readonly createMs: number,
    private readonly logger: Logger,
  ) {}

  /** Undoes the create of `row`, which failed with `message`; resolves after the first try. */
  async undo(row: EnvironmentRow, message: string, key: CreateKey | undefined): Promise<void> {
    const todo = { marked: false, released: key === undefined, deleted: false };
    const attempt = async () => {
      if (!todo.marked) {
        await this.repo.transition(row.id, ['creating', 'running'], 'error', { last_error: message });
        todo.marked = true;
      }
      if (!todo.released && key) {
        await this.keys.release(key.scope, key.key, row.id);
        todo.released = true;
      }
      if (!todo.deleted) {
        await (await this.agents.forHost(row.host_id)).deleteIfPresent(AGENT_VM_PATHS.vm(row.id));
        todo.deleted = true;
      }
    };
    try {
      await attempt();
      return;
    } catch (err) {
      this.logger.warn(
        { env: row.id, err: (err as Error).message, ...todo },
        'undoing a failed create: retrying',
      );
    }
    const deadline = Date.now() + this.createMs;
    const retry = (async () => {
      const { signal } = this.life;
      for (let wait = 500; Date.now() < deadline; wait = Math.min(wait * 2, 10_000)) {
        await sleep(wait, signal);
        if (signal.aborted) return;
        try {
          await attempt();
          this.logger.info({ env: row.id }, 'failed create undone');
          return;
        } catch (err) {
          this.logger.debug({ env: row.id, err: (err as Error).message, ...todo }, 'undoing a failed create');
        }
      }
    })();
    this.pending.add(retry);
    void retry.finally(() => this.pending.delete(retry));
  }

  /** Stops retrying (the reconciler covers what is left) and waits for the retries under way. */
  async stop(): Promise<void> {
    this.life.abort();
    await Promise.all(this.pending);
  }
}
