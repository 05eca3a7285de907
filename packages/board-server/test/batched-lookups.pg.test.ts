/**
 * Point lookups that arrive together run as one DuckDB statement (`reader-pool.ts`,
 * `keyed-lookup.ts`): each request must get exactly the answer it gets alone (columns, rows, their
 * order, errors), whatever else is in its batch, including keys that match nothing or many rows,
 * repeated keys, parameters that cannot be batched and keys past the result limit.
 */

import type { Cell } from '@board/protocol';
import { describeStore } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, nodeEnv, rpc, tag, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
const ROWS = 600;
/** The node's row limit: the `n` lookup of one key returns 12 rows, past it for `n = 0` only. */
const MAX_ROWS = 12;

interface Outcome {
  result: { columns: string[]; rows: Cell[][] };
  watermark: number;
}

/** A request's answer as a test compares it: the result, or the error's tag and message. */
type Reply = { columns: string[]; rows: Cell[][] } | { error: string };

describeStore('embedded')('batched point lookups', () => {
  let node: NodeProcess;
  const ask = async (sql: string, params: Cell[]): Promise<Reply> => {
    const a = await rpc(node.url, 'query.execute', { sql, tables: T, params }, { board: 'look' });
    if (a.body.status === 'error') return { error: `${a.status} ${tag(a)}: ${a.body.error.message}` };
    const { result } = value<Outcome>(a);
    return { columns: result.columns, rows: result.rows };
  };
  const batched = async (): Promise<number> => {
    const stats = value<{ replicas: { batchedQueries: number } }>(
      await rpc(node.url, 'node.stats', {}, { board: 'look' }),
    );
    return stats.replicas.batchedQueries;
  };

  boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
    const env = nodeEnv(await openStore('embedded'), await tempDir('board-look-'));
    const columns = ['--column', 'n:INTEGER', '--column', 'title:TEXT', '--column', 'val:DOUBLE'];
    expect((await cli(['board', 'create', 'look', ...columns], env)).code).toBe(0);
    node = await startNode({ ...env, BOARD_MAX_RESULT_ROWS: String(MAX_ROWS) });
    // n = 0 has 13 rows (past the limit), every other n 12 or fewer; titles repeat, some are null.
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      id: `k${i}`,
      n: i < 13 ? 0 : 1 + (i % 49),
      title: i % 7 === 0 ? null : `t${i % 25}`,
      val: i / 4,
      state: i % 3 === 0 ? 'open' : 'done',
    }));
    for (let i = 0; i < ROWS; i += 200) {
      value(await rpc(node.url, 'mutate.insert', { rows: rows.slice(i, i + 200) }, { board: 'look' }));
    }
  });

  const statements: { sql: string; keys: Cell[] }[] = [
    // Unique text key; keys that match nothing; a key repeated.
    {
      sql: 'SELECT * FROM {{t}} WHERE id = $1',
      keys: [
        'k1',
        'k2',
        'k599',
        'nope',
        'k1',
        'k300',
        '',
        'K1',
        ...Array.from({ length: 40 }, (_, i) => `k${i * 13}`),
      ],
    },
    // Integer key with many rows each (order matters), columns renamed; n = 0 is past the row limit.
    {
      sql: 'SELECT id, n AS num, val FROM {{t}} WHERE n = $1',
      keys: [0, 1, 2, 3, 48, 49, 50, -1, 7, 7, 2 ** 40, ...Array.from({ length: 20 }, (_, i) => i * 2)],
    },
    // The key on the right, a table alias, qualified columns and star.
    {
      sql: 'SELECT t.title, t.*  FROM {{t}} AS t WHERE $1 = t.title',
      keys: ['t1', 't2', 't24', 't25', 'nope', ...Array.from({ length: 20 }, (_, i) => `t${i}`)],
    },
    // The built-in text column state: hundreds of rows for either key, past the limit.
    { sql: 'SELECT id FROM {{t}} WHERE state = $1', keys: ['open', 'done', 'none'] },
    // Parameters that cannot be batched with the others: other types than the column's.
    { sql: 'SELECT id, n FROM {{t}} WHERE n = $1', keys: [3, 2.5, '4', null, true, 5, 6] },
  ];

  it('each request in a batch gets exactly the answer it gets alone', async () => {
    // Alone: one request at a time (nothing to batch with), which also marks each statement small.
    const alone = new Map<string, Reply>();
    for (const { sql, keys } of statements) {
      for (const key of keys) alone.set(JSON.stringify([sql, key]), await ask(sql, [key]));
    }
    // Sanity of the fixture: answers with many rows, none, and the limit's error all occur.
    const answers = [...alone.values()];
    expect(answers.some((a) => 'rows' in a && a.rows.length > 5)).toBe(true);
    expect(answers.some((a) => 'rows' in a && a.rows.length === 0)).toBe(true);
    expect(answers.some((a) => 'error' in a && a.error.includes('ResultTooLarge'))).toBe(true);

    const before = await batched();
    // Together: every key of every statement at once, five times over, in shuffled order.
    const requests = statements.flatMap(({ sql, keys }) => keys.map((key) => ({ sql, key })));
    const all = [...requests, ...requests, ...requests, ...requests, ...requests];
    for (let i = all.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [all[i], all[j]] = [all[j]!, all[i]!];
    }
    const together = await Promise.all(all.map(({ sql, key }) => ask(sql, [key])));
    all.forEach(({ sql, key }, i) => {
      expect({ sql, key, answer: together[i] }).toEqual({
        sql,
        key,
        answer: alone.get(JSON.stringify([sql, key])),
      });
    });
    // And they did run in batches (else this test would prove nothing about them).
    expect(await batched()).toBeGreaterThan(before);
  });

  it('batches during writes answer from one state at or past each request’s acknowledged writes', async () => {
    // Keyed by a unique title, not by id: lookups by id are answered from the key index, not batched.
    const sql = 'SELECT title, n FROM {{t}} WHERE title = $1';
    await ask(sql, ['t1']);
    const WRITES = 30;
    /** The watermark of write `b` (each write is one change), once acknowledged. */
    const writtenAt: number[] = [];
    let acked = 0;
    let writing = true;
    const writer = (async () => {
      for (let b = 0; b < WRITES; b++) {
        const rows = Array.from({ length: 5 }, (_, j) => ({
          id: `w${b}-${j}`,
          title: `w${b}-${j}`,
          n: 1000 + b,
        }));
        const w = value<{ watermark: number }>(
          await rpc(node.url, 'mutate.insert', { rows }, { board: 'look' }),
        );
        writtenAt[b] = w.watermark;
        acked = Math.max(acked, w.watermark);
      }
      writing = false;
    })();
    const before = await batched();
    const seen: { b: number; at: number; rows: Cell[][] }[] = [];
    const readers = Array.from({ length: 24 }, async (_, r) => {
      let last = 0;
      for (let i = 0; writing; i++) {
        const floor = acked;
        const b = (r * 7 + i) % WRITES;
        const out = value<Outcome>(
          await rpc(
            node.url,
            'query.execute',
            { sql, tables: T, params: [`w${b}-${r % 5}`] },
            { board: 'look' },
          ),
        );
        expect(out.watermark).toBeGreaterThanOrEqual(floor);
        expect(out.watermark).toBeGreaterThanOrEqual(last);
        last = out.watermark;
        seen.push({ b, at: out.watermark, rows: out.result.rows.map((row) => [row[1]!]) });
      }
    });
    await Promise.all([writer, ...readers]);
    // Each answer holds the row exactly when the write that made it is in the state it read.
    for (const { b, at, rows } of seen) {
      expect({ b, at, rows }).toEqual({ b, at, rows: at >= writtenAt[b]! ? [[1000 + b]] : [] });
    }
    expect(seen.length).toBeGreaterThan(24);
    expect(await batched()).toBeGreaterThan(before);
  });
});
