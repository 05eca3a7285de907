import { type Kysely, sql } from 'kysely';
import type { Logger } from '../log.js';
import type { BoardDb } from '../store/database.js';

/** Retention settings (see the package README for defaults). */
export interface RetentionOptions {
  maxChanges: number;
  maxAgeSec: number;
  idempotencyTtlSec: number;
  intervalMs: number;
}

/**
 * Trims change logs from the tail only: per board, every record at or below the highest seq that
 * is either older than `maxAgeSec` or more than `maxChanges` behind head. Never leaves a hole.
 * Also forgets idempotency keys older than `idempotencyTtlSec`. Safe to run on several nodes.
 */
export async function sweepRetention(db: Kysely<BoardDb>, options: RetentionOptions): Promise<number> {
  const r = await sql`
    DELETE FROM board_changes c USING (
      SELECT b.board_id, GREATEST(
        b.head - ${options.maxChanges},
        COALESCE((SELECT max(seq) FROM board_changes o
                  WHERE o.board_id = b.board_id AND o.created_at < now() - make_interval(secs => ${options.maxAgeSec})), 0)
      ) AS upto
      FROM board_boards b
    ) t
    WHERE c.board_id = t.board_id AND c.seq <= t.upto`.execute(db);
  await sql`DELETE FROM board_idempotency
    WHERE created_at < now() - make_interval(secs => ${options.idempotencyTtlSec})`.execute(db);
  return Number(r.numAffectedRows ?? 0);
}

/** The retention sweep as a service: `run(signal)` loops until `signal` aborts. */
export class RetentionService {
  constructor(
    private readonly db: Kysely<BoardDb>,
    private readonly options: RetentionOptions,
    private readonly log: Logger,
  ) {}

  /** Sweeps every `intervalMs` until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const trimmed = await sweepRetention(this.db, this.options);
        if (trimmed > 0) this.log.debug({ trimmed }, 'retention: trimmed change records');
      } catch (err) {
        this.log.warn({ err }, 'retention sweep failed');
      }
      await sleep(this.options.intervalMs, signal);
    }
  }
}

/** Resolves after `ms` or as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
