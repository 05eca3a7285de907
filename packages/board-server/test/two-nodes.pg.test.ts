/**
 * Two nodes sharing one PostgreSQL server: a write on A is read on B (the floor respected) and
 * pushed to B's watchers, by LISTEN/NOTIFY and, with LISTEN off, by the poll alone.
 */
import { describeOnServerPostgres, type TestPostgres } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, events, type NodeProcess, rpc, tag, value, watch } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

describeOnServerPostgres('two nodes on one PostgreSQL', () => {
  let pg: TestPostgres;
  let a: NodeProcess;
  let b: NodeProcess;
  let pollOnly: NodeProcess;
  let tempDir: (prefix: string) => Promise<string>;
  let startNode: (env: Record<string, string>) => Promise<NodeProcess>;
  const node = async (id: string, extra: Record<string, string> = {}) => {
    const dir = await tempDir('board-2n-');
    return await startNode({ DATABASE_URL: pg.url(), BOARD_DATA_DIR: dir, BOARD_NODE_ID: id, ...extra });
  };

  boardTest.beforeAll(async ({ testPostgres, tempDir: makeDir, startNode: start }) => {
    [pg, tempDir, startNode] = [testPostgres, makeDir, start];
    const dir = await tempDir('board-2n-cli-');
    expect(
      (
        await cli(['board', 'create', 'shared', '--column', 'title:TEXT'], {
          DATABASE_URL: pg.url(),
          BOARD_DATA_DIR: dir,
        })
      ).code,
    ).toBe(0);
    [a, b, pollOnly] = await Promise.all([
      node('node-a'),
      node('node-b'),
      node('node-poll', { BOARD_NOTIFY: 'off' }),
    ]);
  });

  it('reports distinct node ids on /health and node.stats', async () => {
    expect(await (await fetch(`${a.url}/health`)).json()).toEqual({
      ok: true,
      nodeId: 'node-a',
      version: expect.any(String),
    });
    const stats = value<{ nodeId: string; boards: string[] }>(
      await rpc(b.url, 'node.stats', {}, { board: 'shared' }),
    );
    expect(stats.nodeId).toBe('node-b');
    expect(stats.boards).toContain('shared');
  });

  it('serves on B a write made on A, at or above the write watermark; refuses a floor not yet reached', async () => {
    const w = value<{ watermark: number }>(
      await rpc(a.url, 'mutate.insert', { rows: [{ id: 'x1', title: 'from A' }] }, { board: 'shared' }),
    ).watermark;
    const out = value<{ watermark: number; result: { rows: unknown[][] } }>(
      await rpc(
        b.url,
        'query.execute',
        { sql: "SELECT title FROM {{t}} WHERE id = 'x1'", tables: T, minWatermark: w },
        { board: 'shared' },
      ),
    );
    expect(out.watermark).toBeGreaterThanOrEqual(w);
    expect(out.result.rows).toEqual([['from A']]);
    const ahead = await rpc(
      b.url,
      'query.execute',
      { sql: 'SELECT 1', tables: T, minWatermark: w + 100 },
      { board: 'shared' },
    );
    expect(tag(ahead)).toBe('WatermarkNotReached');
  });

  for (const [label, pick] of [
    ['by LISTEN/NOTIFY', () => b],
    ['by the poll alone (LISTEN off)', () => pollOnly],
  ] as const) {
    it(`pushes A's writes to a watcher on another node ${label}, and measures how fast`, async () => {
      const watcher = pick();
      const head = value<{ head: number }>(
        await rpc(a.url, 'changes.read', { after: 0, limit: 1 }, { board: 'shared' }),
      ).head;
      const sentAt = new Map<number, number>();
      const lags: number[] = [];
      const watching = watch(watcher.url, {
        board: 'shared',
        after: head,
        timeoutMs: 20_000,
        onItem: (item, at) => {
          if ('event' in item && item.event === 'change') {
            const seq = (item.data as { seq: number }).seq;
            const t = sentAt.get(seq);
            if (t !== undefined) lags.push(at - t);
          }
        },
        until: (items) => events(items).filter((e) => e.event === 'change').length >= 5,
      });
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        const ack = value<{ watermark: number }>(
          await rpc(
            a.url,
            'mutate.insert',
            { rows: [{ id: `${watcher.env.BOARD_NODE_ID}-${i}` }] },
            { board: 'shared' },
          ),
        );
        sentAt.set(ack.watermark, t0);
        await new Promise((r) => setTimeout(r, 100));
      }
      const res = await watching;
      const seqs = events(res.items).map((e) => (e.data as { seq: number }).seq);
      expect(seqs).toEqual([head + 1, head + 2, head + 3, head + 4, head + 5]);
      // Freshness is measured and reported, never asserted against a time budget.
      console.info(`propagation ${label}: ${lags.map((l) => l.toFixed(1)).join(', ')} ms`);
    });
  }
});
