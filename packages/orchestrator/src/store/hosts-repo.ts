import type { AgentInfo, Host, HostKind } from '@orch/protocol';
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
      health_detail: null,
      capacity: JSON.stringify(r.info.capacity),
      free: JSON.stringify(r.info.free),
      images: JSON.stringify(r.info.images),
      image_details: JSON.stringify(r.info.image_details),
      gpus: JSON.stringify(r.info.gpus),
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
              last_seen_at: now,
            }
          : {}),
      })
      .where('id', '=', id)
      .execute();
  }
}

function toHost(row: Selectable<HostsTable>): Host {
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
    labels: row.labels,
    last_seen_at: row.last_seen_at ? row.last_seen_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
