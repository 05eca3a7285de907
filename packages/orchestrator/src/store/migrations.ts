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
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => MIGRATIONS,
};
