import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cell, ChangeRecord, ColumnDef, ColumnType, Row } from '@board/protocol';
import { textProblem } from '@board/protocol';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryLimits, SnapshotResult } from './replica.js';
import { Replica } from './replica.js';

/**
 * The key index answers point lookups by id exactly as DuckDB does: for generated boards (every
 * column type, NULLs, unicode, large and extreme values), change batches (inserts, updates of any
 * columns, deletes, ids deleted and inserted again, in one batch or across batches, added columns)
 * and lookups of present, deleted and never-seen ids, every lookup is compared with DuckDB's answer
 * to the same statement at every watermark: columns, cells with their JSON types, row count, bytes
 * and watermark. The index is compared both as kept by the batches and as built afresh from DuckDB.
 */
describe('key index against DuckDB', () => {
  let dir: string;
  const limits: QueryLimits = { timeoutMs: 30_000, maxRows: 1000, maxBytes: 32 << 20 };
  const BIG = 1 << 30;
  const TYPES: ColumnType[] = ['TEXT', 'INTEGER', 'DOUBLE', 'BOOLEAN', 'TIMESTAMP'];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'key-index-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const text = fc
    .oneof(
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.constantFrom(
        '',
        ' ',
        'ä',
        '名前',
        '👩‍👩‍👧',
        'a\u0301',
        '\u00a0',
        'x'.repeat(70_000),
        'é'.repeat(30_000),
      ),
    )
    .filter((s) => textProblem(s) === undefined);
  const safeInt = fc.oneof(
    fc.integer(),
    fc.maxSafeInteger(),
    fc.constantFrom(0, -1, 2 ** 31, -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER),
  );
  const double = fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(0, -0, 0.1, 1e20, 1e308, -1e308, 5e-324, 2 ** 53 + 2, 1 / 3),
  );
  const cellOf = (type: ColumnType): fc.Arbitrary<Cell> =>
    fc.option(
      (type === 'TEXT'
        ? text
        : type === 'DOUBLE'
          ? double
          : type === 'BOOLEAN'
            ? fc.boolean()
            : safeInt.map((n) => (type === 'TIMESTAMP' ? Math.trunc(n / 1000) : n))) as fc.Arbitrary<Cell>,
      { nil: null, freq: 4 },
    );
  const idOf = fc.oneof(
    fc.integer({ min: 0, max: 12 }).map((i) => `k${i}`),
    text.filter((s) => s.length > 0),
  );

  /** One step of a script: a change batch (as generated; applied where it makes sense) or lookups. */
  const step = fc.oneof(
    fc.record({ op: fc.constant('insert' as const), ids: fc.array(idOf, { minLength: 1, maxLength: 4 }) }),
    fc.record({ op: fc.constant('update' as const), n: fc.nat(20) }),
    fc.record({ op: fc.constant('delete' as const), n: fc.nat(20), count: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ op: fc.constant('reinsert' as const), n: fc.nat(20) }),
    fc.record({ op: fc.constant('addColumn' as const), type: fc.constantFrom(...TYPES) }),
  );

  it('answers every lookup as DuckDB does, at every watermark', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...TYPES), { minLength: 0, maxLength: 6 }),
        fc.array(step, { minLength: 1, maxLength: 14 }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 14, maxLength: 14 }),
        fc.infiniteStream(fc.tuple(...TYPES.map(cellOf))),
        async (types, steps, batchSizes, cells) => {
          const columns: ColumnDef[] = types.map((type, i) => ({
            name: `c${i}_${type.toLowerCase()}`,
            type,
          }));
          const path = join(dir, `r${run++}.duckdb`);
          const start: Row[] = [
            { id: 'k0', state: 'open' },
            { id: 'k1', state: null },
          ];
          const replica = await Replica.create(
            path,
            1,
            { memoryLimitMb: 256, threads: 1 },
            [...columns],
            0,
            (push) => push(start.map((r) => ({ ...r, updated_at: 1_700_000_000_000_000 }))),
          );
          try {
            const live = new Set(start.map((r) => r.id as string));
            const gone = new Set<string>();
            let seq = 0;
            let now = 1_700_000_000_000_001;
            const cols = () => [...columns];
            const rowFor = (id: string): Row => {
              const values = cells.next().value as Cell[];
              const row: Row = {
                id,
                state: values[0] === null ? null : `s${String(values[0]).slice(0, 20)}`,
              };
              for (const c of cols()) {
                const v = cells.next().value as Cell[];
                const at = TYPES.indexOf(c.type);
                if (v[at] !== null || at % 2 === 0) row[c.name] = v[at] ?? null; // some cells absent: null
              }
              return row;
            };
            const patchFor = (): Row => {
              const row = rowFor('x');
              delete row.id;
              for (const k of Object.keys(row)) if (cells.next().value?.[2] === null) delete row[k];
              return row;
            };
            const pickLive = (n: number) => [...live][n % Math.max(1, live.size)];
            const pickGone = (n: number) => [...gone][n % Math.max(1, gone.size)];
            const record = (kind: ChangeRecord['kind'], payload: ChangeRecord['payload']): ChangeRecord =>
              // As the change log hands it out: through JSON (jsonb), so -0 arrives as 0.
              JSON.parse(JSON.stringify({ seq: ++seq, kind, payload }));

            const statements = () => [
              'SELECT * FROM items WHERE id = $1',
              'select t.* from items t where $1 = t.ID',
              'SELECT state, id AS key, updated_at FROM "items" WHERE items.id = $1',
              ...columns.map((c) => `SELECT ${c.name}, ${c.name} AS again, id FROM items WHERE id = $1`),
            ];
            const compare = async () => {
              const keys = [...[...live].slice(-5), ...[...gone].slice(-3), 'never', 'K0', ''];
              for (const sql of statements()) {
                for (const key of keys) {
                  const duck = await replica.query(sql, [key], limits);
                  const indexed = replica.lookup(sql, [key], limits);
                  expect(replica.indexes(sql), sql).toBe(true);
                  expect(indexed, `${sql} [${key}]`).toBeDefined();
                  expect(decode(indexed!), `${sql} [${key}]`).toStrictEqual(decode(duck));
                  expect(indexed!.result.bytes).toBe(duck.result.bytes);
                }
              }
            };

            await replica.buildIndex(BIG);
            await compare();
            let batch: ChangeRecord[] = [];
            for (const [i, s] of steps.entries()) {
              now += 1000;
              if (s.op === 'insert') {
                const ids = [...new Set(s.ids)].filter((id) => !live.has(id));
                if (ids.length > 0) batch.push(record('insert', { updatedAt: now, rows: ids.map(rowFor) }));
                for (const id of ids) {
                  live.add(id);
                  gone.delete(id);
                }
              } else if (s.op === 'update' && live.size > 0) {
                const id = pickLive(s.n)!;
                batch.push(record('update', { updatedAt: now, updates: [{ id, patch: patchFor() }] }));
              } else if (s.op === 'delete' && live.size > 0) {
                const ids = [...new Set(Array.from({ length: s.count }, (_v, j) => pickLive(s.n + j)!))];
                batch.push(record('delete', { ids }));
                for (const id of ids) {
                  live.delete(id);
                  gone.add(id);
                }
              } else if (s.op === 'reinsert' && gone.size > 0) {
                const id = pickGone(s.n)!;
                batch.push(record('insert', { updatedAt: now, rows: [rowFor(id)] }));
                gone.delete(id);
                live.add(id);
              } else if (s.op === 'addColumn') {
                const c: ColumnDef = { name: `added${i}`, type: s.type };
                batch.push(record('schema', { columns: [c] }));
                columns.push(c);
              }
              if (batch.length >= batchSizes[i]! || i === steps.length - 1) {
                await replica.apply(batch);
                batch = [];
                expect(replica.watermark).toBe(seq);
                // A schema record drops the index: built afresh from DuckDB, it is compared too.
                if (replica.keyIndex === 'none') await replica.buildIndex(BIG);
                expect(typeof replica.keyIndex).toBe('object');
                await compare();
              }
            }
          } finally {
            replica.close();
          }
        },
      ),
      { numRuns: 10, endOnFailure: true },
    );
  }, 300_000);

  it('leaves to DuckDB what the index cannot answer exactly', async () => {
    const columns: ColumnDef[] = [{ name: 'title', type: 'TEXT' }];
    const replica = await Replica.create(
      join(dir, 'edge.duckdb'),
      1,
      { memoryLimitMb: 64, threads: 1 },
      columns,
      0,
      (push) => push([{ id: 'a', updated_at: 1, state: null, title: 'x'.repeat(1000) }]),
    );
    try {
      await replica.buildIndex(BIG);
      const run = async (sql: string, params: Cell[], l = limits) => {
        await replica.query(sql, params, l).catch(() => undefined);
        return replica.lookup(sql, params, l);
      };
      expect(await run('SELECT * FROM items WHERE id = $1', ['a'])).toBeDefined();
      // Not a lookup by id, or not a plain one: DuckDB.
      expect(await run('SELECT * FROM items WHERE title = $1', ['a'])).toBeUndefined();
      expect(await run('SELECT * FROM items WHERE id = $1 LIMIT 1', ['a'])).toBeUndefined();
      expect(await run('SELECT upper(title) FROM items WHERE id = $1', ['a'])).toBeUndefined();
      expect(await run('SELECT * FROM items WHERE id = $1::VARCHAR', ['a'])).toBeUndefined();
      // A parameter that is not a string (DuckDB casts, or fails): DuckDB.
      expect(await run('SELECT * FROM items WHERE id = $1', [1])).toBeUndefined();
      expect(await run('SELECT * FROM items WHERE id = $1', [null])).toBeUndefined();
      // A row past the byte bound: DuckDB, for its exact ResultTooLarge.
      expect(
        await run('SELECT * FROM items WHERE id = $1', ['a'], { ...limits, maxBytes: 100 }),
      ).toBeUndefined();
      // An index past its budget is refused: DuckDB answers everything.
      const big = await Replica.create(
        join(dir, 'big.duckdb'),
        2,
        { memoryLimitMb: 64, threads: 1 },
        columns,
        0,
        (push) => push([{ id: 'a', updated_at: 1, state: null, title: 'y'.repeat(5000) }]),
      );
      await big.buildIndex(1000);
      expect(big.keyIndex).toBe('refused');
      await big.query('SELECT * FROM items WHERE id = $1', ['a'], limits);
      expect(big.lookup('SELECT * FROM items WHERE id = $1', ['a'], limits)).toBeUndefined();
      big.close();
    } finally {
      replica.close();
    }
  });
});

function decode(s: SnapshotResult): unknown {
  const rows = JSON.parse(`[${s.result.chunks.map((c) => c.toString()).join(',')}]`);
  return { columns: s.result.columns, rowCount: s.result.rowCount, rows, watermark: s.watermark };
}
