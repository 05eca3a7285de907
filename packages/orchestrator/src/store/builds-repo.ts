import type { Build, BuildState, BuildStep, VmSpec } from '@orch/protocol';
import type { Kysely, Selectable } from 'kysely';
import type { BuildsTable, Database } from './schema.js';

export type BuildRow = Selectable<BuildsTable>;

/** Builds in the database: the record and its steps, written as the build goes. */
export class BuildsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: {
    id: string;
    task_id: string;
    base_image: string;
    spec: VmSpec;
    workspace: string;
    no_cache: boolean;
    secret_names: string[];
  }): Promise<void> {
    await this.db
      .insertInto('builds')
      .values({
        ...row,
        spec: JSON.stringify(row.spec),
        secret_names: JSON.stringify(row.secret_names),
        state: 'running',
        host_id: null,
        arch: null,
        base_digest: null,
        steps: '[]',
        artifact_snapshot_id: null,
        vm_id: null,
        last_error: null,
        finished_at: null,
      })
      .execute();
  }

  async get(id: string): Promise<BuildRow | undefined> {
    return this.db.selectFrom('builds').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async list(filter: { task_id?: string | undefined; state?: string | undefined }): Promise<BuildRow[]> {
    let q = this.db.selectFrom('builds').selectAll();
    if (filter.task_id) q = q.where('task_id', '=', filter.task_id);
    if (filter.state) q = q.where('state', '=', filter.state);
    return q.orderBy('created_at', 'desc').limit(1000).execute();
  }

  /**
   * Updates a `running` build (steps, where it runs, its VM); `progress` counts finished steps, so
   * each one fires a `build.updated` event. Returns false when the build is no longer running.
   */
  async update(
    id: string,
    fields: Partial<{
      host_id: string;
      arch: string;
      base_digest: string;
      vm_id: string | null;
      steps: BuildStep[];
    }>,
  ): Promise<boolean> {
    const { steps, ...rest } = fields;
    const r = await this.db
      .updateTable('builds')
      .set({
        ...rest,
        ...(steps
          ? {
              steps: JSON.stringify(steps),
              progress: steps.filter((s) => s.state !== 'pending' && s.state !== 'running').length,
            }
          : {}),
        updated_at: new Date(),
      })
      .where('id', '=', id)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Ends a running build (`ready` with its artifact, or `failed` with the reason). */
  async finish(
    id: string,
    state: Exclude<BuildState, 'running'>,
    fields: { artifact_snapshot_id?: string; last_error?: string },
  ): Promise<boolean> {
    const r = await this.db
      .updateTable('builds')
      .set({ state, ...fields, updated_at: new Date(), finished_at: new Date() })
      .where('id', '=', id)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Running builds not updated since `before` (their orchd stopped or died). */
  async stale(before: Date): Promise<BuildRow[]> {
    return this.db
      .selectFrom('builds')
      .selectAll()
      .where('state', '=', 'running')
      .where('updated_at', '<', before)
      .execute();
  }
}

/** The wire form of a build record. */
export function toBuild(row: BuildRow): Build {
  return {
    id: row.id,
    task_id: row.task_id,
    state: row.state as BuildState,
    host_id: row.host_id,
    arch: row.arch,
    base_image: row.base_image,
    base_digest: row.base_digest,
    spec: row.spec,
    workspace: row.workspace,
    no_cache: row.no_cache,
    secret_names: row.secret_names,
    steps: row.steps,
    artifact_snapshot_id: row.artifact_snapshot_id,
    vm_id: row.vm_id,
    last_error: row.last_error,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    finished_at: row.finished_at ? row.finished_at.toISOString() : null,
  };
}
