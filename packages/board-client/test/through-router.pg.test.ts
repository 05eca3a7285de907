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

  it('resumes a watch through the router when the node serving it is killed: nothing lost or repeated', async () => {
    const ctl = new AbortController();
    const w1 = must(await items.insert({ id: 'wk1', title: 'before the kill' }));
    const it = items.watch({ after: w1 - 1, signal: ctl.signal });
    const first = await it.next();
    expect(first.done).toBe(false);
    expect(first.value).toMatchObject({ resync: false, records: [{ seq: w1 }] });
    // The node whose stream the router relays: the one with a watcher.
    const watchers = await Promise.all(
      nodes.map(async (n) => must(await connect({ url: n.url }).board('routed').stats()).watchers as number),
    );
    const serving = watchers.findIndex((w) => w > 0);
    expect(serving).toBeGreaterThanOrEqual(0);
    const killed = nodes[serving]!;
    await killed.kill();
    try {
      const w2 = must(await items.insert({ id: 'wk2', title: 'after the kill' }));
      const seqs: number[] = [];
      for (;;) {
        const next = await it.next();
        // Without a resume the iteration ends here, as on a clean end of the stream.
        expect(next.done).toBe(false);
        if (next.done) break;
        if (!next.value.resync) seqs.push(...next.value.records.map((r) => r.seq));
        if (seqs.includes(w2)) break;
      }
      expect(seqs).toEqual([w2]);
    } finally {
      ctl.abort();
      await it.return?.();
      // The same node back on its port, and up for the router again, for the tests after this one.
      nodes[serving] = await startNode({ ...killed.env, BOARD_PORT: new URL(killed.url).port });
      for (;;) {
        const health = (await (await fetch(`${router.url}/health`)).json()) as { nodes: { state: string }[] };
        if (health.nodes.every((n) => n.state === 'up')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });

  it('rides out a restart of the only node behind a router: the router answers NoNodeAvailable meanwhile', async () => {
    const only = nodes[1]!;
    const single = await startRouterProcess([
      '--nodes',
      only.url,
      '--port',
      '0',
      '--health-interval-ms',
      '100',
    ]);
    try {
      const client = connect<Items>({ url: single.url }).board('routed');
      const ctl = new AbortController();
      const w1 = must(await client.insert({ id: 'rs1', title: 'before the restart' }));
      const it = client.watch({ after: w1 - 1, signal: ctl.signal });
      try {
        expect((await it.next()).value).toMatchObject({ resync: false, records: [{ seq: w1 }] });
        await only.kill();
        // While the node is down the router has no node: its watch answers are 503 NoNodeAvailable.
        const next = it.next();
        for (;;) {
          const r = await fetch(`${single.url}/watch`, { headers: { 'x-data-board': 'routed' } });
          await r.body?.cancel();
          if (r.status === 503) break;
          await new Promise((res) => setTimeout(res, 50));
        }
        nodes[1] = await startNode({ ...only.env, BOARD_PORT: new URL(only.url).port });
        const w2 = must(await connect<Items>({ url: nodes[1].url }).board('routed').insert({ id: 'rs2' }));
        const got = await next;
        expect(got.done).toBe(false);
        expect(got.value).toMatchObject({ resync: false, records: [{ seq: w2 }] });
      } finally {
        ctl.abort();
        await it.return?.();
      }
    } finally {
      await single.stop();
      // The node up for the shared router again, for the tests after this one.
      for (;;) {
        const health = (await (await fetch(`${router.url}/health`)).json()) as { nodes: { state: string }[] };
        if (health.nodes.every((n) => n.state === 'up')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
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
