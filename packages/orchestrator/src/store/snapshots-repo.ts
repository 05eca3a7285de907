import { allowedSources, SNAPSHOT_TRANSITIONS, type Snapshot, type SnapshotState } from '@orch/protocol';
import { type Kysely, type Selectable, sql } from 'kysely';
import { ACTIVE_STATES } from './environments-repo.js';
import type { Database, SnapshotExportsTable, SnapshotsTable } from './schema.js';

export type SnapshotRow = Selectable<SnapshotsTable>;

/** Snapshots and their export requests in the database. */
export class SnapshotsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: {
    id: string;
    vm_id: string;
    task_id: string;
    host_id: string;
    parent_snapshot_id: string | null;
    mode: string;
    comment: string | null;
    requested_live: boolean;
    retention_until: Date | null;
    export?: { destination: string; status: string };
  }): Promise<void> {
    const { export: exp, ...fields } = row;
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('snapshots')
        .values({
          ...fields,
          state: 'creating',
          kind: null,
          arch: null,
          digest: null,
          size_bytes: null,
          last_error: null,
          export_ref: null,
        })
        .execute();
      if (exp)
        await trx
          .insertInto('snapshot_exports')
          .values({ snapshot_id: row.id, ...exp, last_error: null })
          .execute();
    });
  }

  async get(id: string): Promise<SnapshotRow | undefined> {
    return this.db.selectFrom('snapshots').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async list(filter: {
    vm_id?: string | undefined;
    task_id?: string | undefined;
    state?: string | undefined;
  }): Promise<SnapshotRow[]> {
    let q = this.db.selectFrom('snapshots').selectAll();
    if (filter.vm_id) q = q.where('vm_id', '=', filter.vm_id);
    if (filter.task_id) q = q.where('task_id', '=', filter.task_id);
    if (filter.state) q = q.where('state', '=', filter.state);
    return q.orderBy('created_at', 'desc').limit(1000).execute();
  }

  async exportsOf(ids: readonly string[]): Promise<Map<string, Selectable<SnapshotExportsTable>[]>> {
    const out = new Map<string, Selectable<SnapshotExportsTable>[]>();
    if (ids.length === 0) return out;
    const rows = await this.db
      .selectFrom('snapshot_exports')
      .selectAll()
      .where('snapshot_id', 'in', ids)
      .orderBy('id')
      .execute();
    for (const r of rows) out.set(r.snapshot_id, [...(out.get(r.snapshot_id) ?? []), r]);
    return out;
  }

  /**
   * Moves a snapshot to `to` only from one of `from`; returns whether it moved. Every `from` -> `to`
   * must be in `SNAPSHOT_TRANSITIONS` (@orch/protocol); naming another move throws (a bug).
   */
  async transition(
    id: string,
    from: readonly SnapshotState[],
    to: SnapshotState,
    fields: Partial<
      Pick<
        SnapshotRow,
        'kind' | 'arch' | 'digest' | 'last_error' | 'layer_key' | 'state_digest' | 'accelerator'
      >
    > & {
      size_bytes?: number;
    } = {},
  ): Promise<boolean> {
    const sources = allowedSources(SNAPSHOT_TRANSITIONS, from, to);
    const r = await this.db
      .updateTable('snapshots')
      .set({ state: to, updated_at: new Date(), ...fields })
      .where('id', '=', id)
      .where('state', 'in', sources)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Deletes the record. Its export rows go with it; the exported objects themselves stay where
   * they were written (retention decision: exports outlive the snapshot, see the README).
   */
  async delete(id: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('snapshot_exports').where('snapshot_id', '=', id).execute();
      await trx.deleteFrom('snapshots').where('id', '=', id).execute();
    });
  }

  /** Records a new export request; `status` as given (stored verbatim). Returns its id. */
  async addExport(snapshotId: string, destination: string, status: string): Promise<number> {
    const r = await this.db
      .insertInto('snapshot_exports')
      .values({ snapshot_id: snapshotId, destination, status, last_error: null })
      .returning('id')
      .executeTakeFirstOrThrow();
    return r.id;
  }

  async exportRows(snapshotId: string): Promise<Selectable<SnapshotExportsTable>[]> {
    return (await this.exportsOf([snapshotId])).get(snapshotId) ?? [];
  }

  /**
   * The exporter's word on an export: `ready` with its reference (and the snapshot's `export_ref`
   * when it has none yet), or `error` with why. `touch` only renews `updated_at` (claimed).
   */
  async settleExport(
    exportId: number,
    outcome:
      | { status: 'ready'; export_ref: string }
      | { status: 'error'; last_error: string }
      | { touch: true },
  ): Promise<void> {
    const now = new Date();
    await this.db.transaction().execute(async (trx) => {
      if ('touch' in outcome) {
        await trx
          .updateTable('snapshot_exports')
          .set({ updated_at: now })
          .where('id', '=', exportId)
          .execute();
        return;
      }
      const row = await trx
        .updateTable('snapshot_exports')
        .set({
          status: outcome.status,
          updated_at: now,
          last_error: outcome.status === 'error' ? outcome.last_error : null,
          export_ref: outcome.status === 'ready' ? outcome.export_ref : null,
        })
        .where('id', '=', exportId)
        .returning('snapshot_id')
        .executeTakeFirst();
      if (row && outcome.status === 'ready')
        await trx
          .updateTable('snapshots')
          .set({ export_ref: outcome.export_ref, updated_at: now })
          .where('id', '=', row.snapshot_id)
          .where('export_ref', 'is', null)
          .execute();
    });
  }

  /**
   * Exports still `pending` whose last word is older than `before` (their orchd stopped while
   * exporting): claimed by renewing `updated_at`, so one reconciler takes each.
   */
  async claimStaleExports(before: Date): Promise<Selectable<SnapshotExportsTable>[]> {
    return this.db
      .updateTable('snapshot_exports')
      .set({ updated_at: new Date() })
      .where('status', '=', 'pending')
      .where('updated_at', '<', before)
      .returningAll()
      .execute();
  }

  /**
   * Snapshots whose retention has passed (garbage collection), except layers in use: one a
   * `running` build has among its steps, or one an active environment was seeded from (from-build).
   */
  async expired(now: Date): Promise<SnapshotRow[]> {
    return this.db
      .selectFrom('snapshots as s')
      .selectAll('s')
      .where('s.retention_until', '<', now)
      .where('s.state', 'in', ['ready', 'error'])
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('builds as b')
              .select('b.id')
              .where('b.state', '=', 'running')
              .where(sql<boolean>`b.steps @> jsonb_build_array(jsonb_build_object('snapshot_id', s.id))`),
          ),
        ),
      )
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('environments as e')
              .select('e.id')
              .whereRef('e.seed_snapshot_id', '=', 's.id')
              .where('e.state', 'in', ACTIVE_STATES),
          ),
        ),
      )
      .execute();
  }

  /**
   * The newest kept build layer with this key built on `arch`: `ready` (so its artifact is
   * complete: the key is written only with `ready`) and not past `retention_until`.
   */
  async findLayer(layerKey: string, arch: string, now: Date): Promise<SnapshotRow | undefined> {
    return this.db
      .selectFrom('snapshots')
      .selectAll()
      .where('layer_key', '=', layerKey)
      .where('arch', '=', arch)
      .where('state', '=', 'ready')
      .where((eb) => eb.or([eb('retention_until', 'is', null), eb('retention_until', '>', now)]))
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  /**
   * Extends a layer's retention to `until` when it is used (a cache hit or a from-build), if it is
   * still `ready` and would expire sooner (one kept until deleted stays so); false when it is no
   * longer ready (treat as a miss).
   */
  async keepLayer(id: string, until: Date): Promise<boolean> {
    const r = await this.db
      .updateTable('snapshots')
      .set({ retention_until: until })
      .where('id', '=', id)
      .where('state', '=', 'ready')
      .where('layer_key', 'is not', null)
      .where('retention_until', '<', until)
      .executeTakeFirst();
    if (r.numUpdatedRows > 0n) return true;
    const row = await this.get(id);
    return row?.state === 'ready';
  }
}

/**
 * The spec's Snapshot object: optional fields are omitted when unset, `mode` as stored (an empty
 * value was stored as `manual`), `kind` always present (`disk` until the agent says otherwise).
 */
export function toSnapshot(
  row: SnapshotRow,
  exports: readonly Selectable<SnapshotExportsTable>[] = [],
): Snapshot {
  const opt = <K extends string, V>(key: K, value: V | null | undefined) =>
    (value === null || value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
  return {
    id: row.id,
    vm_id: row.vm_id,
    ...opt('task_id', row.task_id),
    ...opt('parent_snapshot_id', row.parent_snapshot_id),
    mode: row.mode,
    state: row.state as Snapshot['state'] & string,
    ...opt('comment', row.comment),
    ...opt('layer_key', row.layer_key),
    ...opt('arch', row.arch as Snapshot['arch']),
    ...opt('digest', row.digest),
    kind: row.kind === 'live' ? 'live' : 'disk',
    ...opt('size_bytes', row.size_bytes === null ? null : Number(row.size_bytes)),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    retention_until: row.retention_until ? row.retention_until.toISOString() : null,
    ...opt('last_error', row.last_error),
    ...opt('export_ref', row.export_ref),
    ...(exports.length > 0
      ? {
          exports: exports.map((e) => ({
            destination: e.destination,
            status: e.status,
            requested_at: e.requested_at.toISOString(),
            updated_at: e.updated_at.toISOString(),
            ...opt('last_error', e.last_error),
          })),
        }
      : {}),
  };
}
