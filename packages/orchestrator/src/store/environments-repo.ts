import {
  allowedSources,
  ENVIRONMENT_TRANSITIONS,
  type Environment,
  type EnvironmentState,
  type Host,
  type ServiceStatus,
} from '@orch/protocol';
import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import { toHost } from './hosts-repo.js';
import type { Database, EnvironmentsTable, LastMoveJson, PortJson, VmSpecJson } from './schema.js';

/** States with a VM on their host (reconciled; the host cannot be removed while one exists). */
export const ACTIVE_STATES: readonly EnvironmentState[] = [
  'creating',
  'running',
  'pausing',
  'paused',
  'resuming',
  'stopping',
];

/** States that hold CPU and RAM on their host: all active ones but `paused` (it holds disk only). */
export const CPU_STATES: readonly EnvironmentState[] = ACTIVE_STATES.filter((s) => s !== 'paused');

/** `gpuKey` of `@orch/protocol` in SQL: the GPU model, with `/<MIG profile>` for a MIG request. */
const GPU_KEY = sql`spec->'gpu'->>'model' || coalesce('/' || (spec->'gpu'->>'mig'), '')`;

/** What one host has reserved for its active environments. */
export interface HostUsage {
  cpus: number;
  ram_mb: number;
  disk_gb: number;
  /** GPUs held, per `gpuKey` of `@orch/protocol` (`h100`, or `h100/1g.10gb` for MIG instances). */
  gpus: Record<string, number>;
}

export type EnvironmentRow = Selectable<EnvironmentsTable>;

export interface NewEnvironment {
  /** The manifest's services, before the agent reported any state. */
  readonly services?: readonly ServiceStatus[];
  readonly id: string;
  readonly task_id: string;
  readonly host_id: string;
  readonly spec: VmSpecJson;
  readonly manifest_inline: string;
  readonly startup_script: string;
  readonly expose: { port: number; as: string }[];
  readonly secrets_enc: string;
  readonly secret_names: string[];
  readonly seed_snapshot_id: string | null;
  readonly restored_from_snapshot_id: string | null;
}

/** Environments in the database. */
export class EnvironmentsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Runs `fn` holding the cluster-wide placement lock (a transaction-scoped advisory lock). Only a
   * drain plans under it now (its moves among themselves); creates and resumes lock the rows of
   * the hosts they place on ({@link withHostLocks}).
   */
  async withPlacementLock<T>(fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext('orchd:placement'))`.execute(trx);
      return fn(trx);
    });
  }

  /**
   * Runs `fn` in a transaction holding the rows of hosts `hostIds` (`FOR NO KEY UPDATE`, taken in
   * id order so that two transactions never wait for each other in a cycle), with those hosts as
   * they are now and the capacity their active environments hold now (read after the locks, so
   * it includes every placement committed on them before). Placement on a host happens only under
   * its row lock, so placements on different hosts run in parallel and never overbook one.
   * Registration, health checks and cordons of those hosts wait until `fn` commits.
   */
  async withHostLocks<T>(
    hostIds: readonly string[],
    fn: (trx: Transaction<Database>, hosts: Host[], usage: Map<string, HostUsage>) => Promise<T>,
  ): Promise<T> {
    const ids = [...new Set(hostIds)].sort();
    return this.db.transaction().execute(async (trx) => {
      const rows =
        ids.length === 0
          ? []
          : await trx
              .selectFrom('hosts')
              .selectAll()
              .where('id', 'in', ids)
              .orderBy('id')
              .forNoKeyUpdate()
              .execute();
      return fn(trx, rows.map(toHost), await this.usage(trx, ids));
    });
  }

  /**
   * Capacity reserved by active environments, per host (all hosts, or those of `hostIds`): a
   * `paused` one reserves its disk and GPUs (its CPUs and RAM are free until it resumes). Summed
   * by the store over the active environments (a partial index), one row per host and GPU model.
   */
  async usage(trx: Kysely<Database> = this.db, hostIds?: readonly string[]): Promise<Map<string, HostUsage>> {
    if (hostIds?.length === 0) return new Map();
    let q = trx
      .selectFrom('environments')
      .select([
        'host_id',
        sql<string | null>`${GPU_KEY}`.as('gpu_key'),
        sql<number>`coalesce(sum((spec->>'cpus')::int) filter (where state <> 'paused'), 0)::int`.as('cpus'),
        sql<number>`coalesce(sum((spec->>'ram_mb')::int) filter (where state <> 'paused'), 0)::int`.as(
          'ram_mb',
        ),
        sql<number>`coalesce(sum((spec->>'storage_gb')::int), 0)::int`.as('disk_gb'),
        sql<number>`coalesce(sum((spec->'gpu'->>'count')::int), 0)::int`.as('gpus'),
      ])
      .where('state', 'in', ACTIVE_STATES)
      .groupBy(['host_id', GPU_KEY]);
    if (hostIds) q = q.where('host_id', 'in', hostIds);
    const usage = new Map<string, HostUsage>();
    for (const r of await q.execute()) {
      const u = usage.get(r.host_id) ?? { cpus: 0, ram_mb: 0, disk_gb: 0, gpus: {} };
      u.cpus += r.cpus;
      u.ram_mb += r.ram_mb;
      u.disk_gb += r.disk_gb;
      // GPUs are held in every active state, paused included (gpu-fit.ts; a GPU VM cannot pause anyway).
      if (r.gpu_key !== null && r.gpus > 0) u.gpus[r.gpu_key] = (u.gpus[r.gpu_key] ?? 0) + r.gpus;
      usage.set(r.host_id, u);
    }
    return usage;
  }

  async insert(env: NewEnvironment, trx: Kysely<Database> = this.db): Promise<EnvironmentRow> {
    const [row] = await this.insertMany([env], trx);
    return row!;
  }

  /** Inserts environments in `creating`, in one statement; returns their rows in the same order. */
  async insertMany(
    envs: readonly NewEnvironment[],
    trx: Kysely<Database> = this.db,
  ): Promise<EnvironmentRow[]> {
    if (envs.length === 0) return [];
    const rows = await trx
      .insertInto('environments')
      .values(
        envs.map((env) => ({
          ...env,
          state: 'creating',
          spec: JSON.stringify(env.spec),
          expose: JSON.stringify(env.expose),
          secret_names: JSON.stringify(env.secret_names),
          services: JSON.stringify(env.services ?? []),
          last_error: null,
          started_at: null,
          expires_at: null,
          stopped_at: null,
        })),
      )
      .returningAll()
      .execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    return envs.map((e) => byId.get(e.id)!);
  }

  async get(id: string): Promise<EnvironmentRow | undefined> {
    return this.db.selectFrom('environments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async list(
    filter: { state?: string | undefined; task_id?: string | undefined; host_id?: string | undefined } = {},
  ): Promise<EnvironmentRow[]> {
    let q = this.db.selectFrom('environments').selectAll();
    if (filter.state) q = q.where('state', '=', filter.state);
    if (filter.task_id) q = q.where('task_id', '=', filter.task_id);
    if (filter.host_id) q = q.where('host_id', '=', filter.host_id);
    return q.orderBy('created_at', 'desc').limit(1000).execute();
  }

  async listActive(hostId?: string): Promise<EnvironmentRow[]> {
    let q = this.db.selectFrom('environments').selectAll().where('state', 'in', ACTIVE_STATES);
    if (hostId) q = q.where('host_id', '=', hostId);
    return q.execute();
  }

  /**
   * Moves an environment to `to` only if it is in one of `from` (so concurrent updaters cannot
   * resurrect a stopped environment). Returns the updated row, or undefined if it was not in `from`.
   * Every `from` -> `to` must be in `ENVIRONMENT_TRANSITIONS` (@orch/protocol); naming another move
   * throws (a bug).
   */
  async transition(
    id: string,
    from: readonly EnvironmentState[],
    to: EnvironmentState,
    fields: {
      last_error?: string | null;
      ports?: PortJson[];
      started_at?: Date;
      expires_at?: Date | null;
    } = {},
  ): Promise<EnvironmentRow | undefined> {
    const sources = allowedSources(ENVIRONMENT_TRANSITIONS, from, to);
    const now = new Date();
    return this.db
      .updateTable('environments')
      .set({
        state: to,
        updated_at: now,
        ...(fields.last_error !== undefined ? { last_error: fields.last_error } : {}),
        ...(fields.ports ? { ports: JSON.stringify(fields.ports) } : {}),
        ...(fields.started_at ? { started_at: fields.started_at } : {}),
        ...(fields.expires_at !== undefined ? { expires_at: fields.expires_at } : {}),
        ...(to === 'stopped' || to === 'error' ? { stopped_at: now } : {}),
      })
      .where('id', '=', id)
      .where('state', 'in', sources)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * Keeps a `running` environment's ports and expiry in step with its VM (they move when the agent
   * resumed it after a restart: new host ports if the old were taken, paused time added to the
   * expiry). Writes only when something changed; returns whether it did.
   */
  async refreshRunning(id: string, ports: PortJson[], expiresAt: Date | null): Promise<boolean> {
    const row = await this.get(id);
    if (row?.state !== 'running') return false;
    // Field by field: jsonb does not keep the key order, so the stored JSON text never matches.
    const key = (p: PortJson[]) => JSON.stringify(p.map((x) => [x.port, x.as, x.host, x.host_port]));
    const same =
      key(row.ports) === key(ports) && (row.expires_at?.getTime() ?? null) === (expiresAt?.getTime() ?? null);
    if (same) return false;
    const updated = await this.db
      .updateTable('environments')
      .set({ ports: JSON.stringify(ports), expires_at: expiresAt, updated_at: new Date() })
      .where('id', '=', id)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return updated.numUpdatedRows > 0n;
  }

  /**
   * Keeps an environment's services as its agent last reported them (while it is active). Writes
   * only when something changed; returns whether it did.
   */
  async refreshServices(id: string, services: readonly ServiceStatus[]): Promise<boolean> {
    const row = await this.get(id);
    if (!row || !['creating', 'running', 'pausing', 'paused', 'resuming'].includes(row.state)) return false;
    const key = (list: readonly ServiceStatus[]) =>
      JSON.stringify(list.map((s) => [s.name, s.image, s.state, s.restarts, s.exit_code ?? null, s.ports]));
    if (key(row.services) === key(services)) return false;
    const updated = await this.db
      .updateTable('environments')
      .set({ services: JSON.stringify(services), updated_at: new Date() })
      .where('id', '=', id)
      .where('state', '=', row.state)
      .executeTakeFirst();
    return updated.numUpdatedRows > 0n;
  }

  /**
   * The last step of a move (a drain): the environment, `resuming` on `fromHost`, is `running` on
   * `toHost` with the target VM's ports and expiry, and says where it came from. Returns whether it
   * switched (false: it was not resuming on `fromHost` any more).
   */
  async switchHost(
    id: string,
    fromHost: string,
    toHost: string,
    fields: { ports: PortJson[]; expires_at: Date | null; last_move: LastMoveJson },
  ): Promise<boolean> {
    const r = await this.db
      .updateTable('environments')
      .set({
        host_id: toHost,
        state: 'running',
        ports: JSON.stringify(fields.ports),
        expires_at: fields.expires_at,
        last_move: JSON.stringify(fields.last_move),
        last_error: null,
        updated_at: new Date(),
      })
      .where('id', '=', id)
      .where('host_id', '=', fromHost)
      .where('state', '=', 'resuming')
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Whether a host still has environments holding capacity (it cannot be removed then). */
  async hostHasActive(hostId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('environments')
      .select('id')
      .where('host_id', '=', hostId)
      .where('state', 'in', ACTIVE_STATES)
      .executeTakeFirst();
    return row !== undefined;
  }
}

/** The API view of an environment row: never the secrets, only their names. */
export function toEnvironment(row: EnvironmentRow): Environment {
  return {
    id: row.id,
    task_id: row.task_id,
    state: row.state as EnvironmentState,
    host_id: row.host_id,
    spec: row.spec,
    expose: row.expose,
    ports: row.ports.map((p) => ({
      ...p,
      url: `http://${p.host.includes(':') ? `[${p.host}]` : p.host}:${p.host_port}`,
    })),
    secret_names: row.secret_names,
    services: row.services,
    seed_snapshot_id: row.seed_snapshot_id,
    restored_from_snapshot_id: row.restored_from_snapshot_id,
    last_error: row.last_error,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    expires_at: row.expires_at?.toISOString() ?? null,
    stopped_at: row.stopped_at?.toISOString() ?? null,
    last_move: row.last_move ?? null,
  };
}
