/**
 * Point reads by id from the replica's key index (`src/replica/key-index.ts`), end to end: random
 * mutations (every column type, NULLs, unicode, large and extreme values, deletes and re-inserts of
 * the same ids, an added column) written through the RPC surface, and after every write point
 * lookups of present, deleted and never-written ids, each asked in the index's shape and in a shape
 * only DuckDB answers; both must be identical (columns, cells and their JSON types) at the write's
 * watermark, with `cache`/`sync` telling what the request's sync did. `node.stats` must show that
 * the index answered. Looped over both stores; on the server store the writes go through a second
 * node, so the reading node's replica and index catch up from the change log.
 */
import type { Cell } from '@board/protocol';
import { describeStore, STORES } from '@support/pg/testing';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, nodeEnv, rpc, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

interface Outcome {
  result: { columns: string[]; rows: Cell[][] };
  watermark: number;
  cache: string;
  sync: { mode: string; from: number; to: number; applied: number };
}

/** Each lookup in the index's shape, and the same lookup as DuckDB alone answers it. */
const SHAPES: [indexed: string, duckdb: string][] = [
  ['SELECT * FROM {{t}} WHERE id = $1', 'SELECT * FROM {{t}} WHERE id = $1 ORDER BY id'],
  [
    'select n, t AS title, ts, id from {{t}} x where $1 = x.ID',
    'select n, t AS title, ts, id from {{t}} x where $1 = x.ID LIMIT 9',
  ],
  [
    'SELECT d, b, state, updated_at FROM {{t}} WHERE id = $1',
    'SELECT d, b, state, updated_at FROM {{t}} WHERE id = $1 OFFSET 0',
  ],
];

const text = fc
  .oneof(
    fc.string({ maxLength: 10 }),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
    fc.constantFrom('', 'ä', '名前', '👩‍👩‍👧', 'it\'s "q"', 'x'.repeat(60_000)),
  )
  .filter((s) => !s.includes('\u0000'));
const cells = {
  t: fc.option(text, { nil: null }),
  n: fc.option(fc.oneof(fc.maxSafeInteger(), fc.constantFrom(0, -1, Number.MAX_SAFE_INTEGER)), { nil: null }),
  d: fc.option(
    fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(-0, 1e308, 5e-324)),
    {
      nil: null,
    },
  ),
  b: fc.option(fc.boolean(), { nil: null }),
  ts: fc.option(fc.integer({ min: -(2 ** 52), max: 2 ** 52 }), { nil: null }),
  state: fc.option(text, { nil: null }),
};
const ids = ['a', 'b', 'c', 'é', '名', ' ', 'a b'];
const op = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), id: fc.constantFrom(...ids), row: fc.record(cells) }),
  fc.record({
    kind: fc.constant('update' as const),
    id: fc.constantFrom(...ids),
    patch: fc.record(cells, { requiredKeys: [] }),
  }),
  fc.record({ kind: fc.constant('delete' as const), id: fc.constantFrom(...ids) }),
  fc.record({ kind: fc.constant('addColumn' as const) }),
);

for (const storeName of STORES) {
  describeStore(storeName)(`point reads from the key index on the ${storeName} store`, () => {
    let reader: NodeProcess;
    let writer: NodeProcess;
    let env: Record<string, string>;

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      const store = await openStore(storeName);
      env = nodeEnv(store, await tempDir('board-kx-'));
      reader = await startNode(env);
      writer = storeName === 'server' ? await startNode(nodeEnv(store, await tempDir('board-kx-'))) : reader;
    });

    it('answers every point lookup as DuckDB does, at every watermark, and says how it synced', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 6, maxLength: 14 }), async (ops) => {
          const board = `kx_${run++}`;
          const columns = ['t:TEXT', 'n:INTEGER', 'd:DOUBLE', 'b:BOOLEAN', 'ts:TIMESTAMP'].flatMap((c) => [
            '--column',
            c,
          ]);
          expect((await cli(['board', 'create', board, ...columns], env)).code).toBe(0);
          const ask = async (sql: string, id: string) =>
            value<Outcome>(
              await rpc(reader.url, 'query.execute', { sql, tables: T, params: [id] }, { board }),
            );
          const stats = async () =>
            value<{ replicas: { keyIndexReads: number; replicas: { board: string; keyIndex: unknown }[] } }>(
              await rpc(reader.url, 'node.stats', {}, { board }),
            ).replicas;
          const write = async (procedure: string, body: unknown) => {
            const a = await rpc(writer.url, procedure, body, { board });
            return a.body.status === 'ok' ? (a.body.value as { watermark: number }).watermark : undefined;
          };
          // The index is built on the first point lookup by id (beside DuckDB's answer to it).
          let watermark = (await write('mutate.insert', { rows: [{ id: 'a', t: 'first' }] }))!;
          for (const [indexed] of SHAPES) await ask(indexed, 'a');
          for (
            let i = 0;
            i < 100 && typeof (await stats()).replicas.find((r) => r.board === board)?.keyIndex !== 'object';
            i++
          )
            await new Promise((r) => setTimeout(r, 50));
          const before = (await stats()).keyIndexReads;
          let asked = 0;
          let added = 0;

          for (const o of ops) {
            let w: number | undefined;
            if (o.kind === 'insert') w = await write('mutate.insert', { rows: [{ id: o.id, ...o.row }] });
            else if (o.kind === 'update')
              w = await write('mutate.update', { updates: [{ id: o.id, patch: o.patch }] });
            else if (o.kind === 'delete') w = await write('mutate.delete', { ids: [o.id] });
            else if (added < 2) {
              expect((await cli(['board', 'add-column', board, `extra${added++}:DOUBLE`], env)).code).toBe(0);
              w = watermark + 1;
            }
            // A refused write (duplicate id, missing row) changes nothing: the head stays.
            const synced = w !== undefined && w > watermark;
            if (synced) watermark = w!;
            for (const id of [o.kind === 'addColumn' ? 'a' : o.id, 'never']) {
              for (const [s, [indexed, duckdb]] of SHAPES.entries()) {
                const viaIndex = await ask(indexed, id);
                const viaDuck = await ask(duckdb, id);
                expect(viaIndex.result, `${indexed} [${id}]`).toStrictEqual(viaDuck.result);
                expect(viaIndex.watermark).toBe(watermark);
                expect(viaDuck.watermark).toBe(watermark);
                // The first read after a write brought the replica (and its index) to the head.
                if (synced && s === 0 && id !== 'never') {
                  expect(viaIndex.cache).toBe('hit');
                  expect(viaIndex.sync).toStrictEqual({
                    mode: 'incremental',
                    from: watermark - 1,
                    to: watermark,
                    applied: 1,
                  });
                } else expect(viaIndex.sync.mode).toBe('none');
                asked++;
              }
            }
          }
          // Every lookup but those right after an added column (the index is rebuilt then) came
          // from the index.
          const served = (await stats()).keyIndexReads - before;
          expect(served).toBeGreaterThanOrEqual(asked - 2 * SHAPES.length * 2 * added - 2);
          expect(served).toBeLessThanOrEqual(asked);
        }),
        { numRuns: 2, endOnFailure: true },
      );
    }, 240_000);
  });
}
