/**
 * The client through a real `board-router` in front of two real board-nodes sharing one PostgreSQL
 * server: the same URL works, `servedBy` names the node that answered (from x-data-served-by),
 * keyed writes apply once, the floor holds, watch streams through the router, and reads keep
 * working when a node is killed.
 */

import { type RouterProcess, startRouterProcess } from '@board/router/testing';
import { boardTest, cli, type NodeProcess, startNode } from '@board/server/testing';
import { describeOnServerPostgres, removeDataDir, type TestPostgres, tempDir } from '@support/pg/testing';
import { afterAll, expect, it } from 'vitest';
import { type BoardClient, type ChangeRecord, connect, type Result } from '../src/index.js';

interface Items {
  title: string | null;
}

function must<T>(r: Result<T>): T {
  if (!r.ok) throw new Error(`expected ok, got ${r.error._tag}: ${r.error.message}`);
  return r.value;
}

describeOnServerPostgres('board-client through board-router', () => {
  let pg: TestPostgres;
  let router: RouterProcess;
  const nodes: NodeProcess[] = [];
  const dirs: string[] = [];
  let items: BoardClient<Items>;

  boardTest.beforeAll(async ({ testPostgres }) => {
    pg = testPostgres;
    const adminDir = await tempDir('client-router-admin-');
    dirs.push(adminDir);
    const created = await cli(['board', 'create', 'routed', '--column', 'title:TEXT'], {
      DATABASE_URL: pg.url(),
      BOARD_DATA_DIR: adminDir,
    });
    expect(created.code, created.stderr).toBe(0);
    for (const id of ['node-a', 'node-b']) {
      const dir = await tempDir('client-router-node-');
      dirs.push(dir);
      nodes.push(await startNode({ DATABASE_URL: pg.url(), BOARD_DATA_DIR: dir, BOARD_NODE_ID: id }));
    }
    router = await startRouterProcess(['--nodes', nodes.map((n) => n.url).join(','), '--port', '0']);
    items = connect<Items>({ url: router.url }).board('routed');
  });

  afterAll(async () => {
    await router?.stop();
    for (const n of nodes) await n.stop();
    for (const d of dirs) await removeDataDir(d);
  });

  it('writes, reads with the floor, and names the node that served each read', async () => {
    const w = must(await items.insert({ id: 'r1', title: 'one' }));
    const seen = new Set<string>();
    const floor = items.atLeast(w);
    for (let i = 0; i < 8; i++) {
      const q = must(await floor.query('SELECT id, title FROM {{items}}'));
      expect(q.result.rows).toEqual([['r1', 'one']]);
      seen.add(q.servedBy);
    }
    expect([...seen].every((s) => s === 'node-a' || s === 'node-b')).toBe(true);
    expect(floor.lastRead().servedBy).toMatch(/^node-[ab]$/);
    const rows = await items.selectAll().where('id', '=', 'r1').execute();
    expect(rows.map((r) => r.title)).toEqual(['one']);
  });

  it('applies a keyed write once, even when it is repeated', async () => {
    const first = must(
      await items.insert({ id: 'k1', title: 'keyed' }, { idempotencyKey: 'client-router-k1' }),
    );
    const again = must(
      await items.insert({ id: 'k1', title: 'keyed' }, { idempotencyKey: 'client-router-k1' }),
    );
    expect(again).toBe(first);
    const q = must(await items.atLeast(first).query("SELECT count(*) AS n FROM {{items}} WHERE id = 'k1'"));
    expect(Number(q.result.rows[0]?.[0])).toBe(1);
  });

  it('watches through the router', async () => {
    const ctl = new AbortController();
    const got: ChangeRecord[] = [];
    const w = must(await items.insert({ id: 'w1', title: 'watched' }));
    for await (const ev of items.watch({ after: w - 1, signal: ctl.signal })) {
      if (!ev.resync) got.push(...ev.records);
      if (got.some((r) => r.seq === w)) ctl.abort();
    }
    expect(got.map((r) => r.seq)).toContain(w);
  });

  it('keeps reading when a node is killed', async () => {
    const w = must(await items.insert({ id: 'f1', title: 'before' }));
    await nodes[0]!.kill();
    for (let i = 0; i < 6; i++) {
      const q = must(await items.atLeast(w).query("SELECT title FROM {{items}} WHERE id = 'f1'"));
      expect(q.result.rows).toEqual([['before']]);
      expect(q.servedBy).toBe('node-b');
    }
  });
});
