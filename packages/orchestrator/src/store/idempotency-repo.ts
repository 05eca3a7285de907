import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.js';

/** One create's key: who sent it (`scope`), the key, and the fingerprint of its request. */
export interface IdempotencyClaim {
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly environment_id: string;
}

/** What a key already names: the environment of the first create, and that create's fingerprint. */
export interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly environment_id: string;
}

/**
 * Idempotency keys of `POST /v1/environments` (migration 0010), shared by every `orchd` on the
 * store. A key is claimed in the transaction that inserts its environment, so a key names an
 * environment exactly when that environment exists; a claim racing another orchd's claim of the
 * same key waits for it (the primary key) and then finds it. Rows older than the retention count as
 * absent: a new claim takes them over, and {@link prune} deletes them.
 */
export class IdempotencyRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** The live record of `key` from `scope` (created after `cutoff`), if any: one primary-key read. */
  async find(
    scope: string,
    key: string,
    cutoff: Date,
    trx: Kysely<Database> = this.db,
  ): Promise<IdempotencyRecord | undefined> {
    return trx
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'environment_id'])
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('created_at', '>', cutoff)
      .executeTakeFirst();
  }

  /**
   * Claims `claims` (each scope and key at most once) in `trx`, in one statement, in key order (two
   * transactions claiming overlapping keys wait for each other in the same order, never in a
   * cycle). A key held by a live record is not taken; one older than `cutoff` is taken over.
   * Returns the claims taken, as `scope key` strings.
   */
  async claim(
    trx: Kysely<Database>,
    claims: readonly IdempotencyClaim[],
    cutoff: Date,
  ): Promise<Set<string>> {
    if (claims.length === 0) return new Set();
    const sorted = [...claims].sort((a, b) =>
      a.scope === b.scope ? (a.key < b.key ? -1 : 1) : a.scope < b.scope ? -1 : 1,
    );
    const rows = await trx
      .insertInto('idempotency_keys')
      .values(sorted.map((c) => ({ ...c, created_at: sql<Date>`now()` })))
      .onConflict((oc) =>
        oc
          .columns(['scope', 'key'])
          .doUpdateSet({
            fingerprint: (eb) => eb.ref('excluded.fingerprint'),
            environment_id: (eb) => eb.ref('excluded.environment_id'),
            created_at: sql<Date>`now()`,
          })
          .where('idempotency_keys.created_at', '<=', cutoff),
      )
      .returning(['scope', 'key'])
      .execute();
    return new Set(rows.map((r) => `${r.scope} ${r.key}`));
  }

  /** Gives `key` up (its create failed), unless another environment has it by now. */
  async release(scope: string, key: string, environmentId: string): Promise<void> {
    await this.db
      .deleteFrom('idempotency_keys')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('environment_id', '=', environmentId)
      .execute();
  }

  /** Deletes the records created before `cutoff`; returns how many. */
  async prune(cutoff: Date): Promise<number> {
    const r = await this.db
      .deleteFrom('idempotency_keys')
      .where('created_at', '<=', cutoff)
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
