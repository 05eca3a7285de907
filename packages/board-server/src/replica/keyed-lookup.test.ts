import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyedLookup, keyKind } from './keyed-lookup.js';

/**
 * Which statements run batched, on DuckDB's own parse trees: only a plain lookup by one text or
 * integer column. Anything that could make a batch's answer differ from the statement's own
 * (ordering, limits, aggregates, expressions, joins, casts, more parameters) is left alone.
 */
describe('keyed lookups', () => {
  let instance: DuckDBInstance;
  const columns = [
    { name: 'title', type: 'TEXT' as const },
    { name: 'n', type: 'INTEGER' as const },
    { name: 'val', type: 'DOUBLE' as const },
    { name: 'at', type: 'TIMESTAMP' as const },
  ];
  const lookup = async (sql: string) => {
    const conn = await instance.connect();
    try {
      const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR)', [sql]);
      const tree = JSON.parse(String(reader.getRows()[0]?.[0]));
      return keyedLookup(tree.statements, (c) => keyKind(columns, c));
    } finally {
      conn.closeSync();
    }
  };

  beforeAll(async () => {
    instance = await DuckDBInstance.create(':memory:');
  });
  afterAll(() => instance.closeSync());

  it('batches a plain lookup by a text or integer column, as written', async () => {
    expect((await lookup('SELECT * FROM "items" WHERE id = $1'))?.sql(2)).toBe(
      'SELECT "id" AS "__board_key", * FROM "items" WHERE "id" IN ($1, $2)',
    );
    const aliased = await lookup('select t.title, n AS "the n", t.* from items t where $1 = t.N');
    expect(aliased?.kind).toBe('integer');
    expect(aliased?.sql(4)).toBe(
      'SELECT "t"."N" AS "__board_key", "t"."title", "n" AS "the n", "t".* FROM "items" AS "t" WHERE "t"."N" IN ($1, $2, $3, $4)',
    );
    expect((await lookup('SELECT id FROM items WHERE state = ?'))?.kind).toBe('text');
    expect((await lookup('SELECT id FROM items WHERE "Title" = $1'))?.kind).toBe('text');
  });

  it('leaves everything else to run on its own', async () => {
    for (const sql of [
      'SELECT * FROM items WHERE val = $1', // DOUBLE key
      'SELECT * FROM items WHERE at = $1', // TIMESTAMP key
      'SELECT * FROM items WHERE updated_at = $1',
      'SELECT * FROM items WHERE id = $1 ORDER BY n',
      'SELECT * FROM items WHERE id = $1 LIMIT 1',
      'SELECT DISTINCT id FROM items WHERE id = $1',
      'SELECT count(*) FROM items WHERE id = $1',
      'SELECT id FROM items WHERE id = $1 GROUP BY id',
      'SELECT upper(id) FROM items WHERE id = $1',
      'SELECT id, 1 FROM items WHERE id = $1',
      'SELECT * EXCLUDE (n) FROM items WHERE id = $1',
      "SELECT COLUMNS('i.*') FROM items WHERE id = $1",
      'SELECT * FROM items WHERE id = $1::VARCHAR',
      'SELECT * FROM items WHERE lower(id) = $1',
      'SELECT * FROM items WHERE id = $1 AND n = $2',
      'SELECT * FROM items WHERE id = $1 OR id = $1',
      'SELECT * FROM items WHERE id <> $1',
      'SELECT * FROM items WHERE id = n',
      "SELECT * FROM items WHERE id = 'x'",
      'SELECT * FROM items a JOIN items b USING (id) WHERE a.id = $1',
      'SELECT * FROM (SELECT * FROM items) WHERE id = $1',
      'WITH x AS (SELECT * FROM items) SELECT * FROM x WHERE id = $1',
      'SELECT * FROM items WHERE id = $1 UNION ALL SELECT * FROM items WHERE id = $1',
      'SELECT * FROM main.items WHERE id = $1',
      'SELECT * FROM other WHERE id = $1',
      'SELECT * FROM items USING SAMPLE 10 WHERE id = $1',
      'SELECT x.id FROM items t WHERE t.id = $1',
      'SELECT * FROM items t WHERE x.id = $1',
      'SELECT row_number() OVER () FROM items WHERE id = $1',
      'SELECT * FROM items WHERE id = $1 QUALIFY true',
    ]) {
      expect({ sql, batched: await lookup(sql) }).toEqual({ sql, batched: undefined });
    }
  });

  it('knows the kinds of the built-in and declared columns, case-insensitively', () => {
    expect(keyKind(columns, 'ID')).toBe('text');
    expect(keyKind(columns, 'state')).toBe('text');
    expect(keyKind(columns, 'Title')).toBe('text');
    expect(keyKind(columns, 'n')).toBe('integer');
    expect(keyKind(columns, 'val')).toBeUndefined();
    expect(keyKind(columns, 'updated_at')).toBeUndefined();
    expect(keyKind(columns, 'missing')).toBeUndefined();
  });
});
