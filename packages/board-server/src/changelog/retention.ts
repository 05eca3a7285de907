import { Periodic, type Service } from '@support/server';
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

/** The retention sweep as a service: `run(signal)` sweeps every `intervalMs` until `signal` aborts. */
export class RetentionService implements Service {
  readonly name = 'retention sweep';
  private readonly loop: Periodic;

  constructor(db: Kysely<BoardDb>, options: RetentionOptions, log: Logger) {
    this.loop = new Periodic({
      name: this.name,
      intervalMs: options.intervalMs,
      log,
      tick: async () => {
        const trimmed = await sweepRetention(db, options);
        if (trimmed > 0) log.debug({ trimmed }, 'retention: trimmed change records');
      },
    });
  }

  run(signal: AbortSignal): Promise<void> {
    return this.loop.run(signal);
  }
}
