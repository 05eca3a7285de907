/**
 * Readers and writers at once on one board: queries run in parallel on the board's replica while
 * change batches are applied. Every answer is one consistent state: each insert of BATCH rows is
 * seen whole or not at all, the reported watermark is exactly the state read (rows = BATCH x
 * batches), a reader's watermarks never go backwards, every answer is at least as new as the last
 * write acknowledged before the request was sent, and a floor above the head is still refused.
 */

import { describeStore } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, nodeEnv, rpc, tag, value } from './fixtures.js';

const BATCH = 40;
const WRITES = 60;
const READERS = 16;
const T = [{ token: 't', entity: 'items' }];

interface Outcome {
  result: { columns: string[]; rows: (string | number | null)[][] };
  watermark: number;
}

describeStore('embedded')('parallel reads on one board', () => {
  let node: NodeProcess;

  boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
    const env = nodeEnv(await openStore('embedded'), await tempDir('board-par-'));
    expect((await cli(['board', 'create', 'par', '--column', 'batch:INTEGER'], env)).code).toBe(0);
    expect((await cli(['board', 'create', 'grp', '--column', 'batch:INTEGER'], env)).code).toBe(0);
    expect((await cli(['board', 'create', 'spec', '--column', 'title:TEXT'], env)).code).toBe(0);
    node = await startNode(env);
  });

  it('never shows a torn batch, a wrong or backward watermark, or a state older than an acknowledged write', async () => {
    const start = value<Outcome>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}}', tables: T },
        { board: 'par' },
      ),
    ).watermark;
    let acked = start;
    let writing = true;
    let failed = false;
    const writer = (async () => {
      for (let b = 0; b < WRITES && !failed; b++) {
        const rows = Array.from({ length: BATCH }, (_, j) => ({ id: `b${b}-${j}`, batch: b }));
        const w = value<{ watermark: number }>(
          await rpc(node.url, 'mutate.insert', { rows }, { board: 'par' }),
        ).watermark;
        acked = Math.max(acked, w);
      }
      writing = false;
    })();
    let answers = 0;
    const reader = async (n: number) => {
      let last = 0;
      while (writing && !failed) {
        const floor = acked;
        const sql =
          n % 2 === 0
            ? 'SELECT coalesce(sum(c), 0) AS n, count(*) AS batches, min(c) AS smallest FROM (SELECT batch, count(*) AS c FROM {{t}} GROUP BY batch)'
            : 'SELECT (SELECT count(*) FROM {{t}}) AS n, (SELECT count(DISTINCT batch) FROM {{t}}) AS batches, (SELECT min(c) FROM (SELECT count(*) AS c FROM {{t}} GROUP BY batch)) AS smallest';
        const out = value<Outcome>(
          await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'par' }),
        );
        const [rowCount, batches, smallest] = (out.result.rows[0] ?? []).map(Number) as [
          number,
          number,
          number,
        ];
        // Whole batches only, and exactly as many as the watermark says.
        expect(out.watermark - start).toBe(batches);
        expect(rowCount).toBe(batches * BATCH);
        if (batches > 0) expect(smallest).toBe(BATCH);
        expect(out.watermark).toBeGreaterThanOrEqual(last);
        // Synced per request: at least every write acknowledged before this request was sent.
        expect(out.watermark).toBeGreaterThanOrEqual(floor);
        last = out.watermark;
        answers++;
      }
    };
    const guarded = (n: number) =>
      reader(n).catch((err: unknown) => {
        failed = true;
        throw err;
      });
    // Every reader and the writer run to the end before a failure is reported (nothing left writing).
    const settled = await Promise.allSettled([
      writer,
      ...Array.from({ length: READERS }, (_, n) => guarded(n)),
    ]);
    for (const r of settled) if (r.status === 'rejected') throw r.reason;
    expect(answers).toBeGreaterThan(READERS);

    const head = value<Outcome>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}}', tables: T },
        { board: 'par' },
      ),
    );
    expect(head.watermark).toBe(start + WRITES);
    expect(Number(head.result.rows[0]?.[0])).toBe(WRITES * BATCH);
    // A floor above the head is refused, in parallel as well as alone.
    const refused = await Promise.all(
      Array.from({ length: 8 }, () =>
        rpc(
          node.url,
          'query.execute',
          { sql: 'SELECT count(*) FROM {{t}}', tables: T, minWatermark: head.watermark + 1 },
          { board: 'par' },
        ),
      ),
    );
    for (const r of refused) expect(tag(r)).toBe('WatermarkNotReached');
  });

  it('serves parallel point queries with each request getting its own answer', async () => {
    const ids = Array.from({ length: 64 }, (_, i) => `p-${i}`);
    value(
      await rpc(
        node.url,
        'mutate.insert',
        { rows: ids.map((id, i) => ({ id, batch: 1000 + i })) },
        { board: 'par' },
      ),
    );
    const answers = await Promise.all(
      ids.map((id) =>
        rpc(
          node.url,
          'query.execute',
          { sql: 'SELECT id, batch FROM {{t}} WHERE id = $1', tables: T, params: [id] },
          { board: 'par' },
        ),
      ),
    );
    answers.forEach((a, i) => {
      const out = value<Outcome>(a);
      expect(out.result.rows).toEqual([[ids[i], 1000 + i]]);
    });
  });

  it('answers a repeated GROUP BY after writes widened the grouped range (no stale cached plan)', async () => {
    // DuckDB plans a GROUP BY over a small integer range as a perfect hash sized from the table's
    // statistics; a plan cached before the writes used to fail with "Perfect hash aggregate".
    const sql = 'SELECT batch, count(*) AS n FROM {{t}} GROUP BY batch ORDER BY batch';
    const groups = async () =>
      value<Outcome>(await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'grp' })).result.rows
        .length;
    for (let round = 1; round <= 3; round++) {
      const rows = Array.from({ length: 4 }, (_, j) => ({
        id: `g-${round}-${j}`,
        batch: round * 4 + j,
      }));
      value(await rpc(node.url, 'mutate.insert', { rows }, { board: 'grp' }));
      // Several times, so that every reader connection has the plan cached before the next round.
      for (let k = 0; k < 6; k++) expect(await groups()).toBe(round * 4);
    }
  });

  it('never answers from a replica behind the head, though the query starts before the head is read', async () => {
    // Reads that find the replica at the head let the next read start its query at once, beside
    // its head read; each write below leaves the replica one change behind, so that early query
    // reads a stale state and must be dropped for a sync, its result and its failure alike.
    const ask = async (sql: string) =>
      await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'spec' });
    const write = async (procedure: string, input: unknown) =>
      value<{ watermark: number }>(await rpc(node.url, procedure, input, { board: 'spec' })).watermark;
    const asNumber = 'SELECT CAST(title AS INTEGER) AS n FROM {{t}} ORDER BY n';
    await write('mutate.insert', { rows: [{ id: 'bad', title: 'not a number' }] });
    for (let k = 0; k < 3; k++) expect(tag(await ask(asNumber))).toBe('QueryFailed');
    // The stale state fails; the state at the head (the bad row deleted) does not.
    let acked = await write('mutate.delete', { ids: ['bad'] });
    const fixed = value<Outcome & { sync: { mode: string } }>(await ask(asNumber));
    expect([fixed.result.rows, fixed.watermark, fixed.sync.mode]).toEqual([[], acked, 'incremental']);
    // And the other way round: the stale state answers, the state at the head fails.
    for (let k = 0; k < 3; k++) expect(value<Outcome>(await ask(asNumber)).result.rows).toEqual([]);
    await write('mutate.insert', { rows: [{ id: 'bad2', title: 'still not a number' }] });
    expect(tag(await ask(asNumber))).toBe('QueryFailed');
    await write('mutate.delete', { ids: ['bad2'] });
    // Each read right after its write sees it, at exactly that write's watermark.
    for (let i = 1; i <= 20; i++) {
      acked = await write('mutate.insert', { rows: [{ id: `n${i}`, title: String(i) }] });
      const out = value<Outcome & { cache: string }>(await ask('SELECT count(*) FROM {{t}}'));
      expect([Number(out.result.rows[0]?.[0]), out.watermark]).toEqual([i, acked]);
      const again = value<Outcome & { cache: string; sync: { mode: string } }>(
        await ask('SELECT count(*) FROM {{t}}'),
      );
      expect([again.watermark, again.cache, again.sync.mode]).toEqual([acked, 'hit', 'none']);
    }
  });

  it('keeps the row and byte bounds for a statement whose earlier results were small', async () => {
    // A statement whose last result was small runs materialized (one DuckDB call); the bounds and
    // the answers must not depend on that.
    const rows = async (params: number[]) =>
      await rpc(
        node.url,
        'query.execute',
        { sql: "SELECT repeat('x', $2::INTEGER) AS s FROM range($1::BIGINT)", tables: T, params },
        { board: 'spec' },
      );
    const count = (a: Awaited<ReturnType<typeof rows>>) => value<Outcome>(a).result.rows.length;
    expect(count(await rows([1, 1]))).toBe(1);
    expect(count(await rows([2, 1]))).toBe(2);
    const tooMany = await rows([100001, 1]);
    expect([tooMany.status, tag(tooMany)]).toEqual([200, 'ResultTooLarge']);
    expect(tooMany.text).toContain('larger than 100000 rows');
    expect(count(await rows([3, 1]))).toBe(3);
    const tooBig = await rows([90000, 400]);
    expect([tooBig.status, tag(tooBig)]).toEqual([200, 'ResultTooLarge']);
    expect(tooBig.text).toContain(`larger than ${32 * 1024 * 1024} bytes`);
    expect(count(await rows([100000, 1]))).toBe(100000);
    expect(count(await rows([4, 1]))).toBe(4);
    const small = value<Outcome>(await rows([2, 3]));
    expect(small.result.rows).toEqual([['xxx'], ['xxx']]);
  });
});
