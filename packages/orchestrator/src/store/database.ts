import { EmbeddedPostgres, isStoreUnavailable } from '@support/pg';
import { sleep } from '@support/server';
import { Kysely, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { migrationProvider } from './migrations.js';
import type { Database } from './schema.js';

/** The orchestrator's store: one Kysely over PostgreSQL, embedded or at `DATABASE_URL`. */
export interface Store {
  readonly db: Kysely<Database>;
  /** One connection of its own for the placement queue (`Placer`), besides `db`'s pool. */
  readonly placementDb: Kysely<Database>;
  /** Whether API keys are accepted: only with `DATABASE_URL` (orchestrator.md, "API key"). */
  readonly keyStore: boolean;
  readonly mode: 'embedded' | 'server';
  /** Where the store is, for a connection of its own (LISTEN for the event stream). */
  readonly connectionString: string;
  close(): Promise<void>;
}

const START_ATTEMPTS = 30;

/**
 * Opens the store and brings its schema up to date. A server that is not reachable yet is retried
 * for about 30 s before giving up; after start, outages surface per request as `unavailable` and
 * the pool reconnects by itself.
 */
export async function openStore(config: Config, logger: Logger): Promise<Store> {
  let embedded: EmbeddedPostgres | undefined;
  let poolConfig: pg.PoolConfig;
  if (config.databaseUrl) {
    poolConfig = { connectionString: config.databaseUrl };
  } else {
    embedded = new EmbeddedPostgres({ dataDir: config.dataDir, program: 'orchd', logger, stopAdopted: true });
    await embedded.start();
    poolConfig = { connectionString: embedded.connectionString };
  }
  const connect = (max: number) => {
    const pool = new pg.Pool({
      ...poolConfig,
      max,
      // Waiting for a pooled connection and opening one (SCRAM, slow on a busy machine) share this
      // bound; the same 10 s as a query's, so only a server that answers nothing is an outage.
      connectionTimeoutMillis: 10_000,
      // A server that stops answering (frozen, partitioned) must not hang requests: fail as unavailable.
      query_timeout: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // A client losing its server (idle in the pool, or checked out by a query) emits 'error'; with no
    // listener that would crash the process. Log it: the query fails as unavailable, the pool reconnects.
    pool.on('error', (err) => logger.warn({ err: err.message }, 'database connection lost'));
    pool.on('connect', (client) => {
      client.on('error', (err) => logger.warn({ err: err.message }, 'database connection lost'));
    });
    return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  };
  const db = connect(config.dbPoolSize);
  // Placement's own connection: the placement queue never waits behind the rest of a burst
  // (agent calls being recorded, reads) for a connection of the shared pool.
  const placementDb = connect(1);
  const close = async () => {
    await placementDb.destroy().catch(() => undefined);
    await db.destroy().catch(() => undefined);
    await embedded?.stop();
  };
  try {
    await migrate(db, logger);
  } catch (err) {
    await close();
    throw err;
  }
  return {
    db,
    placementDb,
    keyStore: config.databaseUrl !== '',
    mode: embedded ? 'embedded' : 'server',
    connectionString: poolConfig.connectionString!,
    close,
  };
}

async function migrate(db: Kysely<Database>, logger: Logger): Promise<void> {
  // Numbers are reserved per feature branch (0005-0007 land after 0008 on a database that already
  // has 0008): run a missing lower-numbered migration rather than refuse the database.
  const migrator = new Migrator({ db, provider: migrationProvider, allowUnorderedMigrations: true });
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (!error) {
      for (const r of results ?? [])
        logger.info({ migration: r.migrationName, status: r.status }, 'migration');
      return;
    }
    if (!isStoreUnavailable(error) || attempt >= START_ATTEMPTS) {
      throw new Error(`the database is not usable: ${(error as Error).message}`);
    }
    logger.warn({ attempt, err: (error as Error).message }, 'database not reachable yet; retrying');
    await sleep(1000);
  }
}
