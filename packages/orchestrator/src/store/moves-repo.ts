import type { EnvironmentMove, MoveState } from '@orch/protocol';
import type { Kysely, Selectable } from 'kysely';
import type { Database, EnvironmentMovesTable } from './schema.js';

export type MoveRow = Selectable<EnvironmentMovesTable>;

/** How long a claim on a move lasts without renewal; past it another orchd takes it over. */
export const MOVE_LEASE_MS = 20_000;

/** Moves of environments between hosts (migration 0007). */
export class MovesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** A new move, `planned` and claimed by its creator. Fails (unique index) when the environment already has an open move. */
  async insert(row: {
    id: string;
    environment_id: string;
    from_host_id: string;
    to_host_id: string;
    artifact_id: string;
  }): Promise<MoveRow> {
    return this.db
      .insertInto('environment_moves')
      .values({
        ...row,
        state: 'planned',
        digest: null,
        state_digest: null,
        reason: null,
        downtime_ms: null,
        paused_at: null,
        lease_until: new Date(Date.now() + MOVE_LEASE_MS),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async get(id: string): Promise<MoveRow | undefined> {
    return this.db.selectFrom('environment_moves').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async list(filter: {
    host_id?: string | undefined;
    environment_id?: string | undefined;
  }): Promise<MoveRow[]> {
    let q = this.db.selectFrom('environment_moves').selectAll();
    if (filter.host_id)
      q = q.where((eb) =>
        eb.or([eb('from_host_id', '=', filter.host_id!), eb('to_host_id', '=', filter.host_id!)]),
      );
    if (filter.environment_id) q = q.where('environment_id', '=', filter.environment_id);
    return q.orderBy('created_at', 'desc').limit(1000).execute();
  }

  /** Ids of environments with a move under way (the reconciler leaves them to the move). */
  async openEnvironmentIds(): Promise<Set<string>> {
    const rows = await this.db
      .selectFrom('environment_moves')
      .select('environment_id')
      .where('state', 'not in', ['done', 'rolled_back'])
      .execute();
    return new Set(rows.map((r) => r.environment_id));
  }

  /** Sets the state (and fields) and renews the lease. */
  async update(
    id: string,
    fields: Partial<Pick<MoveRow, 'reason' | 'downtime_ms' | 'paused_at' | 'digest' | 'state_digest'>> & {
      state?: MoveState;
    },
  ): Promise<void> {
    await this.db
      .updateTable('environment_moves')
      .set({ ...fields, updated_at: new Date(), lease_until: new Date(Date.now() + MOVE_LEASE_MS) })
      .where('id', '=', id)
      .execute();
  }

  /** Renews the lease of a move this orchd is driving. */
  async renew(id: string): Promise<void> {
    await this.db
      .updateTable('environment_moves')
      .set({ lease_until: new Date(Date.now() + MOVE_LEASE_MS) })
      .where('id', '=', id)
      .execute();
  }

  /** Open moves whose lease ran out (their orchd stopped or died), claimed for this orchd. */
  async claimStale(now = new Date()): Promise<MoveRow[]> {
    return this.db
      .updateTable('environment_moves')
      .set({ lease_until: new Date(now.getTime() + MOVE_LEASE_MS) })
      .where('state', 'not in', ['done', 'rolled_back'])
      .where('lease_until', '<', now)
      .returningAll()
      .execute();
  }
}

/** The API view of a move. */
export function toMove(row: MoveRow): EnvironmentMove {
  return {
    id: row.id,
    environment_id: row.environment_id,
    from_host_id: row.from_host_id,
    to_host_id: row.to_host_id,
    state: row.state as MoveState,
    reason: row.reason,
    downtime_ms: row.downtime_ms,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
