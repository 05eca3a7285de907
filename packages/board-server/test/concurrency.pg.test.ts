/**
 * Many writers on one board: watermarks are gap-free in commit order (a reader that saw W never
 * later sees a change below W appear), and keyed writes are neither lost nor duplicated even when
 * every one is sent twice at once. Half the writers are unkeyed (the one-statement insert path). Looped over both stores; on the server store the writers are
 * spread over two nodes sharing it.
 */
import { describeStore, STORES, type TestStore } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, events, type NodeProcess, nodeEnv, rpc, value, watch } from './fixtures.js';

const WRITERS = 12;
const WRITES_EACH = 25;

for (const storeName of STORES) {
  describeStore(storeName)(`concurrent writers on the ${storeName} store`, () => {
    let store: TestStore;
    const nodes: NodeProcess[] = [];

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      store = await openStore(storeName);
      const dir = await tempDir('board-cc-');
      const env = nodeEnv(store, dir);
      expect((await cli(['board', 'create', 'hot', '--column', 'writer:INTEGER'], env)).code).toBe(0);
      nodes.push(await startNode(env));
      if (storeName === 'server') {
        const dir2 = await tempDir('board-cc-');
        nodes.push(await startNode(nodeEnv(store, dir2)));
      }
    });

    it('assigns gap-free watermarks in commit order and applies every keyed write exactly once', async () => {
      const urls = nodes.map((n) => n.url);
      // A reader that pages changes.read while the writers run: if a lower watermark could commit
      // after a higher one was visible, this reader would skip it and end up with a hole.
      let writing = true;
      const pagedSeqs: number[] = [];
      const reader = (async () => {
        let cursor = 0;
        while (writing || cursor < WRITERS * WRITES_EACH) {
          const page = value<{ resync: boolean; records: { seq: number }[]; cursor: number }>(
            await rpc(
              urls[urls.length - 1] as string,
              'changes.read',
              { after: cursor, limit: 7 },
              { board: 'hot' },
            ),
          );
          expect(page.resync).toBe(false);
          pagedSeqs.push(...page.records.map((r) => r.seq));
          cursor = page.cursor;
        }
      })();
      const streamed = watch(urls[0] as string, {
        board: 'hot',
        after: 0,
        timeoutMs: 120_000,
        until: (items) => events(items).length >= WRITERS * WRITES_EACH,
      });

      const acks = new Map<string, number[]>();
      await Promise.all(
        Array.from({ length: WRITERS }, async (_, w) => {
          for (let i = 0; i < WRITES_EACH; i++) {
            const key = `w${w}-${i}`;
            if (w % 2 === 1) {
              // Unkeyed writers take the node's one-statement insert path.
              const a = await rpc(
                urls[w % urls.length] as string,
                'mutate.insert',
                { rows: [{ id: key, writer: w }] },
                { board: 'hot' },
              );
              acks.set(key, [value<{ watermark: number }>(a).watermark]);
              continue;
            }
            const body = { rows: [{ id: key, writer: w }], idempotencyKey: key };
            // The same keyed write twice at once, through different nodes when there are two.
            const answers = await Promise.all([
              rpc(urls[w % urls.length] as string, 'mutate.insert', body, { board: 'hot' }),
              rpc(urls[(w + 1) % urls.length] as string, 'mutate.insert', body, { board: 'hot' }),
            ]);
            acks.set(
              key,
              answers.map((a) => value<{ watermark: number }>(a).watermark),
            );
          }
        }),
      );
      writing = false;
      await reader;
      const total = WRITERS * WRITES_EACH;

      for (const [key, pair] of acks) {
        if (pair.length === 2) expect(pair[0], key).toBe(pair[1]);
      }
      const marks = [...acks.values()].map((p) => p[0] as number).sort((x, y) => x - y);
      expect(marks).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      expect(pagedSeqs).toEqual(Array.from({ length: total }, (_, i) => i + 1));

      const stream = events((await streamed).items);
      expect(stream.map((e) => (e.data as { seq: number }).seq)).toEqual(
        Array.from({ length: total }, (_, i) => i + 1),
      );

      const counts = value<{ result: { rows: unknown[][] } }>(
        await rpc(
          urls[0] as string,
          'query.execute',
          {
            sql: 'SELECT count(*), count(DISTINCT id) FROM {{t}}',
            tables: [{ token: 't', entity: 'items' }],
            minWatermark: total,
          },
          { board: 'hot' },
        ),
      );
      expect(counts.result.rows).toEqual([[total, total]]);
    });
  });
}
