import {
  type AgentInfo,
  gpuHealthDetail,
  type Host,
  type HostCapacityHistory,
  type HostKind,
} from '@orch/protocol';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database, HostsTable } from './schema.js';

/** What registration writes: provider details plus the topology the agent reported. */
export interface HostRegistration {
  readonly id: string;
  readonly kind: HostKind;
  readonly agentUrl: string;
  /** Sealed agent token, or null for "use MICROVM_AGENT_TOKEN". */
  readonly agentTokenSealed: string | null;
  readonly labels: Record<string, string>;
  readonly info: AgentInfo;
}

/** A host with what is needed to dial it (never leaves the server). */
export interface HostWithToken {
  readonly host: Host;
  readonly agentTokenSealed: string | null;
}

/** Registered hosts in the database. */
export class HostsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts or replaces the provider details of a host, keeping its state (cordon) and creation time. */
  async upsert(r: HostRegistration): Promise<{ host: Host; created: boolean }> {
    const now = new Date();
    const topology = {
      arch: r.info.arch,
      version: r.info.version,
      accelerator: r.info.accelerator,
      health: 'healthy',
      health_detail: gpuHealthDetail(r.info.gpu_status),
      capacity: JSON.stringify(r.info.capacity),
      free: JSON.stringify(r.info.free),
      images: JSON.stringify(r.info.images),
      image_details: JSON.stringify(r.info.image_details),
      gpus: JSON.stringify(r.info.gpus),
      gpu_devices: JSON.stringify(r.info.gpu_devices),
      gpu_status: r.info.gpu_status === null ? null : JSON.stringify(r.info.gpu_status),
      last_seen_at: now,
      updated_at: now,
    };
    const provider = {
      kind: r.kind,
      agent_url: r.agentUrl,
      agent_token_enc: r.agentTokenSealed,
      labels: JSON.stringify(r.labels),
    };
    const row = await this.db
      .insertInto('hosts')
      .values({ id: r.id, ...provider, ...topology, state: 'active' })
      .onConflict((oc) => oc.column('id').doUpdateSet({ ...provider, ...topology }))
      .returningAll()
      .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
      .executeTakeFirstOrThrow();
    return { host: toHost(row), created: row.inserted };
  }

  async get(id: string): Promise<HostWithToken | undefined> {
    const row = await this.db.selectFrom('hosts').selectAll().where('id', '=', id).executeTakeFirst();
    return row && { host: toHost(row), agentTokenSealed: row.agent_token_enc };
  }

  async list(): Promise<HostWithToken[]> {
    const rows = await this.db.selectFrom('hosts').selectAll().orderBy('id').execute();
    return rows.map((row) => ({ host: toHost(row), agentTokenSealed: row.agent_token_enc }));
  }

  async setState(id: string, state: 'active' | 'cordoned'): Promise<Host | undefined> {
    const row = await this.db
      .updateTable('hosts')
      .set({ state, updated_at: new Date() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
    return row && toHost(row);
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('hosts').where('id', '=', id).executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /** Records the outcome of a health check: fresh topology when the agent answered, else only health. */
  async recordHealth(
    id: string,
    health: Host['health'],
    detail: string | null,
    info?: AgentInfo,
  ): Promise<void> {
    const now = new Date();
    await this.db
      .updateTable('hosts')
      .set({
        health,
        health_detail: detail,
        ...(info
          ? {
              arch: info.arch,
              version: info.version,
              accelerator: info.accelerator,
              capacity: JSON.stringify(info.capacity),
              free: JSON.stringify(info.free),
              images: JSON.stringify(info.images),
              image_details: JSON.stringify(info.image_details),
              gpus: JSON.stringify(info.gpus),
              gpu_devices: JSON.stringify(info.gpu_devices),
              gpu_status: info.gpu_status === null ? null : JSON.stringify(info.gpu_status),
              last_seen_at: now,
            }
          : {}),
      })
      .where('id', '=', id)
      .execute();
    if (info) await this.recordSample(id, info);
  }

  /**
   * Adds a capacity sample unless one of this host is younger than {@link SAMPLE_MIN_GAP_SECONDS}
   * (several orchds check the same hosts), and forgets samples older than a day.
   */
  private async recordSample(id: string, info: AgentInfo): Promise<void> {
    await sql`
      INSERT INTO host_samples (host_id, capacity, free)
      SELECT ${id}, ${JSON.stringify(info.capacity)}::jsonb, ${JSON.stringify(info.free)}::jsonb
      WHERE NOT EXISTS (
        SELECT 1 FROM host_samples
        WHERE host_id = ${id} AND at > now() - make_interval(secs => ${SAMPLE_MIN_GAP_SECONDS}))`.execute(
      this.db,
    );
    await this.db
      .deleteFrom('host_samples')
      .where('host_id', '=', id)
      .where('at', '<', sql<Date>`now() - interval '1 day'`)
      .execute();
  }

  /**
   * Host `id`'s capacity over the last `minutes`, in at most {@link HISTORY_POINTS} buckets; each
   * point is the bucket's least free resources (its busiest moment) and the capacity then.
   */
  async capacityHistory(id: string, minutes: number): Promise<HostCapacityHistory> {
    const bucket = Math.max(SAMPLE_MIN_GAP_SECONDS, Math.ceil((minutes * 60) / HISTORY_POINTS));
    const { rows } = await sql<{
      at: Date;
      cap_cpus: number;
      cap_ram: number;
      cap_disk: number;
      cpus: number;
      ram: number;
      disk: number;
    }>`
      SELECT to_timestamp(floor(extract(epoch FROM at) / ${bucket}) * ${bucket}) AS at,
             max((capacity->>'cpus')::int) AS cap_cpus, max((capacity->>'ram_mb')::int) AS cap_ram,
             max((capacity->>'disk_gb')::int) AS cap_disk,
             min((free->>'cpus')::int) AS cpus, min((free->>'ram_mb')::int) AS ram,
             min((free->>'disk_gb')::int) AS disk
      FROM host_samples
      WHERE host_id = ${id} AND at > now() - make_interval(mins => ${minutes})
      GROUP BY 1 ORDER BY 1`.execute(this.db);
    return {
      host_id: id,
      minutes,
      bucket_seconds: bucket,
      samples: rows.map((r) => ({
        at: new Date(r.at).toISOString(),
        capacity: { cpus: r.cap_cpus, ram_mb: r.cap_ram, disk_gb: r.cap_disk },
        free: { cpus: r.cpus, ram_mb: r.ram, disk_gb: r.disk },
      })),
    };
  }
}

/** The least time between two capacity samples of one host. */
const SAMPLE_MIN_GAP_SECONDS = 5;
/** The most points a capacity history has. */
const HISTORY_POINTS = 120;

/** The API view of a host row (never its token). */
export function toHost(row: Selectable<HostsTable>): Host {
  return {
    id: row.id,
    kind: row.kind as Host['kind'],
    agent_url: row.agent_url,
    token_source: row.agent_token_enc === null ? 'default' : 'registered',
    arch: row.arch as Host['arch'],
    version: row.version,
    accelerator: row.accelerator,
    state: row.state as Host['state'],
    health: row.health as Host['health'],
    health_detail: row.health_detail,
    capacity: row.capacity,
    free: row.free,
    images: row.images,
    image_details: row.image_details,
    gpus: row.gpus,
    gpu_devices: row.gpu_devices,
    gpu_status: row.gpu_status,
    labels: row.labels,
    last_seen_at: row.last_seen_at ? row.last_seen_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
