/**
 * Live queries follow the rules of reads (`POST /live` on a node with tokens): verb `read` on the
 * board, each board's SQL isolated (escape attempts end the stream with an `error`, never a
 * result), the query time and result size limits, the token's expiry ending the stream, the
 * per-token limit; and a subscriber that stops reading is cut off with a resumable `SlowConsumer`
 * while the others keep getting every result.
 */
import { mintToken } from '@board/server';
import { describe, expect, it } from 'vitest';
import { boardTest, cli, LiveConnection, type NodeProcess, rpc, TOKEN_SECRET, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

describe('live queries follow the rules of reads', () => {
  let node: NodeProcess;
  let admin: string;
  let minted = 0;
  /** A token of its own (a distinct subject: tokens minted alike in one second are the same text). */
  const token = (boards: string[], verbs: ('read' | 'write')[], ttlSec = 3600) =>
    mintToken(TOKEN_SECRET, { boards, verbs, ttlSec, subject: `user${minted++}` });

  boardTest.beforeAll(async ({ tempDir, startNode }) => {
    const env = { BOARD_DATA_DIR: await tempDir('board-live-rules-'), BOARD_TOKEN_SECRET: TOKEN_SECRET };
    node = await startNode({
      ...env,
      BOARD_AUTH: 'on',
      BOARD_WATCH_BUFFER_BYTES: String(64 * 1024),
      BOARD_LIVE_MAX_PER_TOKEN: '2',
      BOARD_QUERY_TIMEOUT_MS: '1500',
      BOARD_MAX_RESULT_ROWS: '1000',
    });
    const created = await Promise.all(
      ['mine', 'secret', 'slow'].map((b) =>
        cli(['board', 'create', b, '--column', 'title:TEXT', '--column', 'pad:TEXT'], env),
      ),
    );
    for (const r of created) expect(r.code, r.stderr).toBe(0);
    admin = await token(['*'], ['read', 'write']);
    value(
      await rpc(
        node.url,
        'mutate.insert',
        { rows: [{ id: 'm1', title: 'mine' }] },
        { board: 'mine', token: admin },
      ),
    );
    value(
      await rpc(
        node.url,
        'mutate.insert',
        { rows: [{ id: 's1', title: 'TOPSECRET' }] },
        { board: 'secret', token: admin },
      ),
    );
  });

  const live = (board: string, sql: string, tok: string | undefined, extra: Record<string, unknown> = {}) =>
    new LiveConnection(node.url, { sql, tables: T, ...extra }, { board, ...(tok ? { token: tok } : {}) });

  it('needs a token with read on the board', async () => {
    const none = live('mine', 'SELECT 1', undefined);
    expect(await none.answered()).toBe(401);
    const writeOnly = live('mine', 'SELECT 1', await token(['mine'], ['write']));
    expect(await writeOnly.answered()).toBe(403);
    const otherBoard = live('secret', 'SELECT * FROM {{t}}', await token(['mine'], ['read']));
    expect(await otherBoard.answered()).toBe(403);
    await otherBoard.end();
    expect(otherBoard.text).not.toContain('TOPSECRET');
  });

  it('isolates the board: every escape attempt ends the stream with an error and no result', async () => {
    const reader = await token(['mine'], ['read']);
    const attempts: [string, string][] = [
      ['SELECT * FROM board_2', 'QueryRefused'],
      ['SELECT * FROM secret', 'QueryRefused'],
      ["SELECT * FROM query_table('secret')", 'QueryRefused'],
      ["SELECT * FROM read_csv('/etc/passwd')", 'QueryRefused'],
      ["SELECT * FROM read_text('/etc/hostname')", 'QueryRefused'],
      ["SELECT * FROM '/etc/passwd'", 'QueryRefused'],
      ["SELECT (SELECT count(*) FROM read_csv('/etc/passwd')) FROM {{t}}", 'QueryRefused'],
      ["SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')", 'QueryRefused'],
      ['SELECT * FROM duckdb_tables()', 'QueryRefused'],
      ["ATTACH '/tmp/x.duckdb' AS x", 'QueryRefused'],
      ["COPY (SELECT * FROM {{t}}) TO '/tmp/live-escape.csv'", 'QueryRefused'],
      ["INSERT INTO {{t}} (id) VALUES ('evil')", 'QueryRefused'],
      ['SELECT 1; SELECT 2', 'QueryRefused'],
      ['PRAGMA database_list', 'QueryRefused'],
      ['SET enable_external_access = true', 'QueryRefused'],
      ['SELECT * FROM {{nope}}', 'UnknownPlaceholder'],
    ];
    for (const [sql, expected] of attempts) {
      const c = live('mine', sql, reader);
      const first = await c.next();
      expect(first?.event, sql).toBe('error');
      expect((first?.data as { _tag?: string } | undefined)?._tag, sql).toBe(expected);
      await c.end();
      expect(
        c.items.filter((i) => i.event !== 'error'),
        sql,
      ).toEqual([]);
      expect(JSON.stringify(c.items)).not.toContain('TOPSECRET');
    }
    // An entity other than the board's one table.
    const entity = new LiveConnection(
      node.url,
      { sql: 'SELECT * FROM {{t}}', tables: [{ token: 't', entity: 'secret' }] },
      { board: 'mine', token: reader },
    );
    expect(await entity.next()).toMatchObject({ event: 'error', data: { _tag: 'UnknownEntity' } });
  });

  it('applies the query time and result size limits', async () => {
    const reader = await token(['mine'], ['read']);
    const big = live('mine', 'SELECT x FROM range(5000) t(x)', reader);
    expect(await big.next()).toMatchObject({ event: 'error', data: { _tag: 'ResultTooLarge' } });
    const slow = live('mine', 'SELECT sum(a.x * b.x) FROM range(200000) a(x), range(200000) b(x)', reader);
    expect(await slow.next()).toMatchObject({ event: 'error', data: { _tag: 'QueryTimeout' } });
  });

  it("ends the stream with TokenExpired when the token's exp passes", async () => {
    const shortLived = await token(['mine'], ['read'], 2);
    const c = live('mine', 'SELECT count(*) FROM {{t}}', shortLived);
    expect((await c.next())?.event).toBe('result');
    expect(await c.next()).toMatchObject({ event: 'error', data: { _tag: 'TokenExpired' } });
    await c.end();
  });

  it('limits the live streams of one token', async () => {
    const reader = await token(['mine'], ['read']);
    const a = live('mine', 'SELECT 1 AS one', reader);
    const b = live('mine', 'SELECT 2 AS two', reader);
    expect((await a.next())?.event).toBe('result');
    expect((await b.next())?.event).toBe('result');
    const c = live('mine', 'SELECT 3 AS three', reader);
    expect(await c.next()).toMatchObject({ event: 'error', data: { _tag: 'TooManyLiveQueries' } });
    // Another token is not affected; closing one frees a place.
    const other = live('mine', 'SELECT 3 AS three', await token(['mine'], ['read']));
    expect((await other.next())?.event).toBe('result');
    a.cut();
    for (let i = 0; ; i++) {
      const d = live('mine', 'SELECT 4 AS four', reader);
      const first = await d.next();
      if (first?.event === 'result') break;
      expect(i, 'the closed stream was never released').toBeLessThan(100);
      await new Promise((r) => setTimeout(r, 50));
    }
    b.cut();
    other.cut();
  });

  it('cuts off a subscriber that stops reading, resumably, while the others get every result', async () => {
    const pad = 'x'.repeat(2000);
    const rows = Array.from({ length: 200 }, (_v, i) => ({
      id: `p${String(i).padStart(3, '0')}`,
      title: 't',
      pad,
    }));
    value(await rpc(node.url, 'mutate.insert', { rows }, { board: 'slow', token: admin }));
    // Every write changes every row (n), so each event is the whole result (about 400 KB).
    const sql = 'SELECT id, pad, (SELECT count(*) FROM {{t}}) AS n FROM {{t}} ORDER BY id';
    const stalled = live('slow', sql, await token(['slow'], ['read']));
    const fast = [
      live('slow', sql, await token(['slow'], ['read'])),
      live('slow', sql, await token(['slow'], ['read'])),
    ];
    expect((await stalled.next())?.event).toBe('result');
    for (const f of fast) expect((await f.next())?.event).toBe('result');
    stalled.pause();
    const stats = async () =>
      value<{ live: { slowConsumers: number } }>(
        await rpc(node.url, 'node.stats', {}, { board: 'slow', token: admin }),
      ).live;
    const before = (await stats()).slowConsumers;
    let n = 0;
    const writeAndFollow = async () => {
      const w = value<{ watermark: number }>(
        await rpc(node.url, 'mutate.insert', { rows: [{ id: `w${n++}` }] }, { board: 'slow', token: admin }),
      ).watermark;
      for (const f of fast) {
        let item = await f.next();
        while (item && (item.data as { watermark: number }).watermark < w) item = await f.next();
        expect(item?.event).toBe('result');
      }
      return w;
    };
    while ((await stats()).slowConsumers === before) {
      await writeAndFollow();
      expect(n, 'the stalled subscriber was never cut off').toBeLessThan(300);
    }
    // The fast subscribers keep getting every result after the cut-off.
    let head = 0;
    for (let i = 0; i < 3; i++) head = await writeAndFollow();
    // The stalled one reads again: what it was sent, then the resumable error.
    stalled.resume();
    await stalled.end();
    const last = stalled.items.at(-1);
    expect(last).toMatchObject({ event: 'error', data: { _tag: 'SlowConsumer' } });
    const resumeFrom = /Last-Event-ID: (\d+)/.exec((last!.data as { message: string }).message)?.[1];
    const received = stalled.items.filter((i) => i.event !== 'error').at(-1);
    expect(resumeFrom).toBe(received?.id);
    const resumed = new LiveConnection(
      node.url,
      { sql, tables: T },
      { board: 'slow', token: await token(['slow'], ['read']), lastEventId: resumeFrom! },
    );
    expect(await resumed.next()).toMatchObject({ event: 'result', data: { watermark: head } });
    resumed.cut();
    for (const f of fast) f.cut();
  });
});
