import { EmbeddedPostgres } from '@support/pg';
import { sleep } from '@support/server';
import { type Generated, Kysely, type Migration, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Logger } from '../log.js';

// int8 (watermarks, counts, epoch micros) as JS numbers: they stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

/** Tables of the system of record (board data tables are `board_<board_no>`, created at run time). */
export interface BoardDb {
  board_boards: {
    board_id: string;
    board_no: Generated<number>;
    columns: unknown;
    head: Generated<number>;
    created_at: Generated<Date>;
  };
  board_changes: {
    board_id: string;
    seq: number;
    kind: string;
    payload: unknown;
    actor: string | null;
    created_at: Generated<Date>;
  };
  board_idempotency: {
    board_id: string;
    key: string;
    watermark: number | null;
    created_at: Generated<Date>;
  };
}

/** The store a node or the admin CLI works on: Kysely, the raw pool, and how to close both. */
export interface Store {
  db: Kysely<BoardDb>;
  pool: pg.Pool;
  kind: 'embedded' | 'postgres';
  connectionString: string;
  close(): Promise<void>;
}

/** Numbered migrations, run at start under Kysely's migration lock (safe with several nodes). */
const MIGRATIONS: Record<string, Migration> = {
  '0001_board_core': {
    async up(db) {
      await sql`CREATE TABLE board_boards (
        board_id text PRIMARY KEY,
        board_no bigserial UNIQUE NOT NULL,
        columns jsonb NOT NULL DEFAULT '[]'::jsonb,
        head bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now()
      )`.execute(db);
      await sql`CREATE TABLE board_changes (
        board_id text NOT NULL,
        seq bigint NOT NULL,
        kind text NOT NULL,
        payload jsonb NOT NULL,
        actor text,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (board_id, seq)
      )`.execute(db);
      await sql`CREATE TABLE board_idempotency (
        board_id text NOT NULL,
        key text NOT NULL,
        watermark bigint,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (board_id, key)
      )`.execute(db);
    },
  },
};

/**
 * Opens the store: `databaseUrl` when given, else the embedded PostgreSQL under `dataDir`.
 * Runs migrations. `ownEmbedded`: stop the embedded instance on close even if it was adopted.
 */
export async function openStore(options: {
  databaseUrl: string | undefined;
  dataDir: string;
  log: Logger;
  poolSize?: number;
  ownEmbedded?: boolean;
}): Promise<Store> {
  let embedded: EmbeddedPostgres | undefined;
  let connectionString = options.databaseUrl;
  if (connectionString === undefined) {
    embedded = new EmbeddedPostgres({
      dataDir: options.dataDir,
      program: 'board-node',
      logger: options.log,
      stopAdopted: options.ownEmbedded ?? false,
    });
    await embedded.start();
    connectionString = embedded.connectionString;
  }
  const pool = new pg.Pool({ connectionString, max: options.poolSize ?? 20 });
  // An idle client losing its server must not crash the process; the next query reports it.
  pool.on('error', (err) => options.log.warn({ error: err.message }, 'postgres pool: idle client error'));
  // A client checked out by a query (or a LISTEN connection) that loses its server emits 'error'
  // too; with no listener that crashes the process. The query itself fails as Unavailable.
  pool.on('connect', (client) => {
    client.on('error', (err) => options.log.warn({ error: err.message }, 'postgres client error'));
  });
  const db = new Kysely<BoardDb>({ dialect: new PostgresDialect({ pool }) });
  const close = async () => {
    await db.destroy();
    await embedded?.stop();
  };
  try {
    const migrator = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
    // Nodes starting at once race on creating Kysely's bookkeeping tables; the loser retries.
    for (let attempt = 1; ; attempt++) {
      const { error } = await migrator.migrateToLatest();
      if (!error) break;
      if (attempt >= 5) throw error;
      await sleep(100 * attempt);
    }
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
  return { db, pool, kind: embedded ? 'embedded' : 'postgres', connectionString, close };
}
