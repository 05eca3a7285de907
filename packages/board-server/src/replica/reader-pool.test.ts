import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BoardError } from '../errors.js';
import { ReadConnection } from './read-connection.js';
import { ReaderPool } from './reader-pool.js';
import type { QueryLimits } from './result-reader.js';

/**
 * The query deadline on a DuckDB call that does not heed an interrupt: one function call that
 * builds a large value (`repeat` of 100 MB takes seconds, whatever the interrupt) is answered
 * `QueryTimeout` at its deadline, while the call runs on; its connection serves nothing else
 * until DuckDB returns, and then serves again.
 */
const until = async (done: () => boolean) => {
  while (!done()) await new Promise((r) => setTimeout(r, 50));
};

describe('deadline of reads that DuckDB does not interrupt', () => {
  let instance: DuckDBInstance;
  const META = 'replica_meta';
  const RUNAWAY = "SELECT length(repeat('x', 100000000)) AS n";
  const limits = (timeoutMs: number): QueryLimits => ({ timeoutMs, maxRows: 1000, maxBytes: 1 << 20 });
  const tagOf = (err: unknown) => (err instanceof BoardError ? err._tag : String(err));
  const state = { generation: 0, watermark: 7, schemaVersion: 0, kindOf: () => undefined };

  beforeAll(async () => {
    instance = await DuckDBInstance.create(':memory:', { threads: '1' });
    const conn = await instance.connect();
    await conn.run(`CREATE TABLE ${META} (watermark BIGINT)`);
    await conn.run(`INSERT INTO ${META} VALUES (7)`);
    await conn.run('CREATE TABLE items (id VARCHAR)');
    await conn.run("INSERT INTO items VALUES ('a')");
    conn.closeSync();
  });
  afterAll(() => instance.closeSync());

  it('answers QueryTimeout while the call runs on; the connection waits for it before the next read', async () => {
    const shared = { lookups: new Map(), kindOf: () => undefined };
    const reader = new ReadConnection(await instance.connect(), '/nowhere/r/x.duckdb', META, shared);
    const first = await reader.query(RUNAWAY, [], limits(100), 0).catch((err: unknown) => err);
    expect(tagOf(first)).toBe('QueryTimeout');
    expect(reader.busy).toBe(true);
    // A read on the busy connection waits for the abandoned call (within its own deadline).
    const next = await reader.query('SELECT count(*) AS c FROM items', [], limits(120_000), 0);
    expect(reader.busy).toBe(false);
    expect(next.watermark).toBe(7);
    expect(next.result.rowCount).toBe(1);
    reader.close();
  });

  it('keeps a busy reader from other queries, holds the replica meanwhile, and serves again after', async () => {
    let held = 0;
    const pool = new ReaderPool(() => instance.connect(), '/nowhere/r/x.duckdb', META, {
      ...state,
      acquire: () => held++,
      release: () => held--,
    });
    const runaway = await pool.query(RUNAWAY, [], limits(100)).catch((err: unknown) => err);
    expect(tagOf(runaway)).toBe('QueryTimeout');
    expect(held).toBe(1);
    // Served by another reader, not run on (nor queued behind) the busy one: the replica is still
    // held for the abandoned call when the answer comes.
    const ok = await pool.query('SELECT id FROM items', [], limits(120_000));
    expect(ok.result.rowCount).toBe(1);
    expect(held).toBe(1);
    await until(() => held === 0);
    // Every reader busy with an abandoned call: a query that no reader takes within its deadline
    // is answered QueryTimeout too, and one with time to wait is served once a call returns.
    const four = await Promise.all(
      [1, 2, 3, 4].map(() => pool.query(RUNAWAY, [], limits(100)).catch((err: unknown) => err)),
    );
    expect(four.map(tagOf)).toEqual(['QueryTimeout', 'QueryTimeout', 'QueryTimeout', 'QueryTimeout']);
    expect(held).toBe(4);
    const waited = await pool.query('SELECT 1', [], limits(100)).catch((err: unknown) => err);
    expect(tagOf(waited)).toBe('QueryTimeout');
    expect((waited as Error).message).toContain('reader connections stayed busy');
    const after = await pool.query('SELECT id FROM items', [], limits(120_000));
    expect(after.result.rowCount).toBe(1);
    await until(() => held === 0);
    pool.close();
  }, 120_000);
});
