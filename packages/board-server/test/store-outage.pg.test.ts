/**
 * The store goes away under a running node: requests are answered with the envelope (tag
 * `Unavailable`), /health still answers, an open watch stream survives and stays complete, and
 * the node serves again once the store is back. It never crashes.
 */
import { describeOnServerPostgres, type TestPostgres } from '@support/pg/testing';
import { expect, it } from 'vitest';
import { boardTest, cli, events, type NodeProcess, rpc, tag, value, watch } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

describeOnServerPostgres('a PostgreSQL outage under a running node', () => {
  let pg: TestPostgres;
  let node: NodeProcess;
  let dir: string;

  boardTest.beforeAll(async ({ testPostgres, tempDir, startNode }) => {
    pg = testPostgres;
    dir = await tempDir('board-outage-');
    const env = { DATABASE_URL: pg.url(), BOARD_DATA_DIR: dir };
    expect((await cli(['board', 'create', 'flaky'], env)).code).toBe(0);
    node = await startNode(env);
  });

  it('answers Unavailable during the outage and serves again after it', async () => {
    const w = value<{ watermark: number }>(
      await rpc(node.url, 'mutate.insert', { rows: [{ id: 'before' }] }, { board: 'flaky' }),
    ).watermark;
    value(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}}', tables: T },
        { board: 'flaky' },
      ),
    );
    // A watch stream open across the outage stays open and delivers what was written after it.
    const stream = watch(node.url, {
      board: 'flaky',
      after: w,
      timeoutMs: 30_000,
      until: (items) => events(items).some((e) => e.event === 'change' || e.event === 'error'),
    });
    await new Promise((r) => setTimeout(r, 300));
    await pg.halt('immediate');

    for (const [procedure, body] of [
      ['mutate.insert', { rows: [{ id: 'during' }] }],
      ['query.execute', { sql: 'SELECT count(*) FROM {{t}}', tables: T }],
      ['changes.read', { after: 0 }],
      ['node.stats', {}],
    ] as const) {
      const a = await rpc(node.url, procedure, body, { board: 'flaky' });
      expect({ procedure, status: a.status, tag: tag(a) }).toEqual({
        procedure,
        status: 200,
        tag: 'Unavailable',
      });
    }
    expect((await fetch(`${node.url}/health`)).status).toBe(200);

    await pg.resume();
    let back: Awaited<ReturnType<typeof rpc>> | undefined;
    for (let i = 0; i < 50; i++) {
      back = await rpc(node.url, 'mutate.insert', { rows: [{ id: 'after' }] }, { board: 'flaky' });
      if (tag(back) === 'ok') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(value<{ watermark: number }>(back as Awaited<ReturnType<typeof rpc>>).watermark).toBe(w + 1);
    const out = value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT id FROM {{t}} ORDER BY id', tables: T },
        { board: 'flaky' },
      ),
    );
    expect(out.result.rows).toEqual([['after'], ['before']]);
    const ended = await stream;
    expect(events(ended.items)).toEqual([
      { event: 'change', id: String(w + 1), data: expect.objectContaining({ seq: w + 1, kind: 'insert' }) },
    ]);
    expect(node.proc.exitCode).toBe(null);
  });
});
