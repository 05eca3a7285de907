import { type Kysely, type Migration, type MigrationProvider, sql } from 'kysely';

/**
 * The schema, as numbered migrations. Append; never edit one that has shipped. Kysely's migrator
 * takes a Postgres advisory lock, so several `orchd` processes may start at once.
 */
const MIGRATIONS: Record<string, Migration> = {
  '0001_hosts_api_keys_settings': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('hosts')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('agent_url', 'text', (c) => c.notNull())
        .addColumn('agent_token_enc', 'text')
        .addColumn('arch', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('accelerator', 'text', (c) => c.notNull().defaultTo('none'))
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('active'))
        .addColumn('health', 'text', (c) => c.notNull().defaultTo('healthy'))
        .addColumn('health_detail', 'text')
        .addColumn('capacity', 'jsonb', (c) => c.notNull())
        .addColumn('free', 'jsonb', (c) => c.notNull())
        .addColumn('images', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addColumn('gpus', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addColumn('labels', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
        .addColumn('last_seen_at', 'timestamptz')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('secret_sha256', 'text', (c) => c.notNull().unique())
        .addColumn('hint', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('last_used_at', 'timestamptz')
        .addColumn('revoked_at', 'timestamptz')
        .execute();
      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
    },
  },
  '0002_environments_snapshots': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('environments')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('task_id', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('host_id', 'text', (c) => c.notNull())
        .addColumn('spec', 'jsonb', (c) => c.notNull())
        .addColumn('manifest_inline', 'text', (c) => c.notNull())
        .addColumn('startup_script', 'text', (c) => c.notNull())
        .addColumn('expose', 'jsonb', (c) => c.notNull())
        .addColumn('secrets_enc', 'text', (c) => c.notNull())
        .addColumn('secret_names', 'jsonb', (c) => c.notNull())
        .addColumn('seed_snapshot_id', 'text')
        .addColumn('restored_from_snapshot_id', 'text')
        .addColumn('ports', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('started_at', 'timestamptz')
        .addColumn('expires_at', 'timestamptz')
        .addColumn('stopped_at', 'timestamptz')
        .execute();
      await db.schema
        .createIndex('environments_host_state')
        .on('environments')
        .columns(['host_id', 'state'])
        .execute();
      await db.schema.createIndex('environments_task').on('environments').column('task_id').execute();
      await db.schema
        .createTable('snapshots')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('vm_id', 'text', (c) => c.notNull())
        .addColumn('task_id', 'text')
        .addColumn('host_id', 'text', (c) => c.notNull())
        .addColumn('parent_snapshot_id', 'text')
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('comment', 'text')
        .addColumn('requested_live', 'boolean', (c) => c.notNull())
        .addColumn('kind', 'text')
        .addColumn('arch', 'text')
        .addColumn('digest', 'text')
        .addColumn('size_bytes', 'bigint')
        .addColumn('retention_until', 'timestamptz')
        .addColumn('last_error', 'text')
        .addColumn('export_ref', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
      await db.schema.createIndex('snapshots_vm').on('snapshots').column('vm_id').execute();
      await db.schema
        .createTable('snapshot_exports')
        .addColumn('id', 'serial', (c) => c.primaryKey())
        .addColumn('snapshot_id', 'text', (c) => c.notNull().references('snapshots.id').onDelete('cascade'))
        .addColumn('destination', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('requested_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('last_error', 'text')
        .execute();
    },
  },
  '0003_host_image_details': {
    async up(db: Kysely<unknown>) {
      // Each image a host boots with its size, digest and source (AgentInfo.image_details).
      await db.schema
        .alterTable('hosts')
        .addColumn('image_details', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .execute();
    },
  },
  // Events (GET /v1/events): written by triggers in the same transaction as the change, so every
  // orchd on the database (and any writer) produces them; NOTIFY wakes every orchd's streams.
  // Payloads name only non-secret columns.
  '0004_events': {
    async up(db: Kysely<unknown>) {
      await sql`CREATE TABLE orch_events (
        id bigserial PRIMARY KEY,
        type text NOT NULL,
        payload jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`.execute(db);
      await sql`CREATE INDEX orch_events_created ON orch_events (created_at)`.execute(db);
      await sql`CREATE FUNCTION orch_record_event() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          kind text := TG_ARGV[0];
          fields text[] := string_to_array(TG_ARGV[1], ',');
          row_now jsonb;
          row_before jsonb;
          typ text;
          body jsonb;
          event_id bigint;
        BEGIN
          IF TG_OP <> 'INSERT' THEN row_before := to_jsonb(OLD); END IF;
          IF TG_OP <> 'DELETE' THEN row_now := to_jsonb(NEW); END IF;
          IF TG_OP = 'INSERT' THEN
            typ := kind || '.created';
          ELSIF TG_OP = 'DELETE' THEN
            typ := kind || '.deleted';
            row_now := row_before;
          ELSE
            IF (SELECT bool_and(row_now -> f IS NOT DISTINCT FROM row_before -> f)
                FROM unnest(fields) AS f) THEN
              RETURN NULL;
            END IF;
            typ := kind || '.updated';
          END IF;
          SELECT jsonb_object_agg(f, row_now -> f) INTO body FROM unnest(fields) AS f;
          IF TG_OP = 'UPDATE' THEN
            body := body || jsonb_build_object('previous_state', row_before -> 'state');
          END IF;
          INSERT INTO orch_events (type, payload) VALUES (typ, body) RETURNING id INTO event_id;
          PERFORM pg_notify('orch_events', event_id::text);
          RETURN NULL;
        END $$`.execute(db);
      const watched: [string, string, string][] = [
        ['environments', 'environment', 'id,state,host_id,task_id,last_error,restored_from_snapshot_id'],
        ['snapshots', 'snapshot', 'id,state,vm_id,host_id,kind,last_error'],
        ['hosts', 'host', 'id,kind,state,health'],
      ];
      for (const [table, kind, fields] of watched) {
        await sql
          .raw(
            `CREATE TRIGGER ${table}_events AFTER INSERT OR UPDATE OR DELETE ON ${table}
             FOR EACH ROW EXECUTE FUNCTION orch_record_event('${kind}', '${fields}')`,
          )
          .execute(db);
      }
    },
  },
  '0005_services': {
    async up(db: Kysely<unknown>) {
      // The manifest's services and their state as the agent last reported them (ServiceStatus[]).
      await db.schema
        .alterTable('environments')
        .addColumn('services', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .execute();
      // A change of a service's state is an `environment.updated` event (the dashboard re-renders).
      await sql`DROP TRIGGER IF EXISTS environments_events ON environments`.execute(db);
      await sql
        .raw(
          `CREATE TRIGGER environments_events AFTER INSERT OR UPDATE OR DELETE ON environments
           FOR EACH ROW EXECUTE FUNCTION orch_record_event('environment', 'id,state,host_id,task_id,last_error,restored_from_snapshot_id,services')`,
        )
        .execute(db);
    },
  },
  // Build layers (issue 15): `snapshots.layer_key` is written only together with `ready` (so a
  // lookup never finds a half-written layer); builds keep their steps as JSON; build events come
  // from the same trigger function as 0004's (`progress` changes once per finished step).
  '0006_builds': {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('snapshots').addColumn('layer_key', 'text').execute();
      await sql`CREATE INDEX snapshots_layer_key ON snapshots (layer_key, arch) WHERE layer_key IS NOT NULL`.execute(
        db,
      );
      await db.schema
        .createTable('builds')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('task_id', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('host_id', 'text')
        .addColumn('arch', 'text')
        .addColumn('base_image', 'text', (c) => c.notNull())
        .addColumn('base_digest', 'text')
        .addColumn('spec', 'jsonb', (c) => c.notNull())
        .addColumn('workspace', 'text', (c) => c.notNull())
        .addColumn('no_cache', 'boolean', (c) => c.notNull())
        .addColumn('secret_names', 'jsonb', (c) => c.notNull())
        .addColumn('steps', 'jsonb', (c) => c.notNull())
        .addColumn('progress', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('artifact_snapshot_id', 'text')
        .addColumn('vm_id', 'text')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('finished_at', 'timestamptz')
        .execute();
      await db.schema.createIndex('builds_task').on('builds').column('task_id').execute();
      await sql
        .raw(
          `CREATE TRIGGER builds_events AFTER INSERT OR UPDATE OR DELETE ON builds
           FOR EACH ROW EXECUTE FUNCTION orch_record_event('build', 'id,state,task_id,host_id,progress,artifact_snapshot_id,vm_id,last_error')`,
        )
        .execute(db);
    },
  },
  // Snapshots travel (issue 17): the memory-state checksum and the accelerator of a snapshot (a
  // live one resumes only under the same), each export's reference, the moves of a host drain, and
  // the last move on the environment. Exports and moves produce events like the other tables.
  '0007_exports': {
    async up(db: Kysely<unknown>) {
      await sql`ALTER TABLE snapshots ADD COLUMN state_digest text, ADD COLUMN accelerator text`.execute(db);
      await sql`ALTER TABLE snapshot_exports ADD COLUMN export_ref text`.execute(db);
      await sql`ALTER TABLE environments ADD COLUMN last_move jsonb`.execute(db);
      await sql`CREATE TABLE environment_moves (
        id text PRIMARY KEY,
        environment_id text NOT NULL,
        from_host_id text NOT NULL,
        to_host_id text NOT NULL,
        state text NOT NULL,
        artifact_id text NOT NULL,
        digest text,
        state_digest text,
        reason text,
        downtime_ms integer,
        paused_at timestamptz,
        lease_until timestamptz NOT NULL DEFAULT now(),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`.execute(db);
      await sql`CREATE INDEX environment_moves_env ON environment_moves (environment_id)`.execute(db);
      await sql`CREATE UNIQUE INDEX environment_moves_one_open ON environment_moves (environment_id)
        WHERE state NOT IN ('done', 'rolled_back')`.execute(db);
      await sql`CREATE TRIGGER snapshot_exports_events AFTER INSERT OR UPDATE OR DELETE ON snapshot_exports
        FOR EACH ROW EXECUTE FUNCTION orch_record_event('snapshot_export', 'id,snapshot_id,destination,status,last_error')`.execute(
        db,
      );
      await sql`CREATE TRIGGER environment_moves_events AFTER INSERT OR UPDATE OR DELETE ON environment_moves
        FOR EACH ROW EXECUTE FUNCTION orch_record_event('environment_move', 'id,environment_id,from_host_id,to_host_id,state,reason,downtime_ms')`.execute(
        db,
      );
    },
  },
  // Capacity history of each host (GET /v1/hosts/{id}/capacity): one row per health check that
  // reached the agent, at most one per host every few seconds however many orchds check it, kept a day.
  '0008_host_samples': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('host_samples')
        .addColumn('host_id', 'text', (c) => c.notNull().references('hosts.id').onDelete('cascade'))
        .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('capacity', 'jsonb', (c) => c.notNull())
        .addColumn('free', 'jsonb', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('host_samples_host_at')
        .on('host_samples')
        .columns(['host_id', 'at'])
        .execute();
    },
  },
  // Browser sessions ended by POST /logout, so that a copied cookie is refused by every orchd on
  // the store, now and after a restart. Keyed by the SHA-256 of the session id (a primary-key read
  // per cookie-authenticated request); rows go a day after the session would have expired anyway.
  '0009_revoked_sessions': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('revoked_sessions')
        .addColumn('sid_sha256', 'text', (c) => c.primaryKey())
        .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('revoked_sessions_expires_at')
        .on('revoked_sessions')
        .column('expires_at')
        .execute();
    },
  },
  // GPU hosts: each GPU as the agent detected it, and the host's detection and passthrough state
  // (GET /v1/hosts/{id}, the dashboard's host page, /metrics; placement reads them).
  '0010_host_gpu_facts': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('hosts')
        .addColumn('gpu_devices', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addColumn('gpu_status', 'jsonb')
        .execute();
    },
  },
  // Bursts of creates (issue 31). `idempotency_keys`: the key a create was sent with, per caller
  // (`scope`), and the environment it made, so a retry gets that environment back; rows older than
  // the retention are reclaimed by a new create with the key and pruned by the reconciler. The
  // partial index keeps the capacity sum (active environments only) from reading the history.
  '0011_burst_placement': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('environment_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
        .execute();
      await db.schema
        .createIndex('idempotency_keys_created_at')
        .on('idempotency_keys')
        .column('created_at')
        .execute();
      await sql`CREATE INDEX environments_active_host ON environments (host_id)
        WHERE state IN ('creating', 'running', 'pausing', 'paused', 'resuming', 'stopping')`.execute(db);
    },
  },
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => MIGRATIONS,
};
