/**
 * A live query (`POST /live`) through board-router in front of two board-nodes on one PostgreSQL
 * server: routed to a node, relayed event by event, and moved to the other node when its node is
 * killed or stopped, on the same client connection: the next event is the whole result at or past
 * the last watermark relayed, equal to `query.execute`'s.
 */
import { applyLiveDiff, type Cell, type LiveDiffEvent } from '@board/protocol';
import { boardTest, cli, LiveConnection, type NodeProcess, rpc, value } from '@board/server/testing';
import { describeOnServerPostgres } from '@support/pg/testing';
import { parseMetrics } from '@support/server/testing';
import { afterAll, expect, it } from 'vitest';
import { type BoardRouter, loadConfig, startBoardRouter } from '../src/index.js';
import { createLogger } from '../src/log.js';

const T = [{ token: 't', entity: 'items' }];
const BOARD = 'livefail';
const SQL = 'SELECT title, count(*) AS n FROM {{t}} GROUP BY title ORDER BY title';

describeOnServerPostgres('live queries through board-router', () => {
  const nodes: NodeProcess[] = [];
  let router: BoardRouter;

  boardTest.beforeAll(async ({ testPostgres, tempDir, startNode }) => {
    const created = await cli(['board', 'create', BOARD, '--column', 'title:TEXT'], {
      DATABASE_URL: testPostgres.url(),
      BOARD_DATA_DIR: await tempDir('router-live-cli-'),
    });
    expect(created.code, created.stderr).toBe(0);
    for (const id of ['live-a', 'live-b', 'live-c']) {
      const dir = await tempDir('router-live-node-');
      nodes.push(
        await startNode({ DATABASE_URL: testPostgres.url(), BOARD_DATA_DIR: dir, BOARD_NODE_ID: id }),
      );
    }
    router = await startBoardRouter(
      loadConfig({ nodes: nodes.map((n) => n.url).join(','), port: '0', healthIntervalMs: '50' }, {}),
      createLogger('silent'),
    );
  });

  afterAll(async () => {
    await router?.stop();
  });

  /** The node whose live stream the router relays: the one with a live stream open. */
  const serving = async (alive: NodeProcess[]) => {
    for (;;) {
      for (const n of alive) {
        const s = value<{ live: { streams: number } }>(await rpc(n.url, 'node.stats', {}, { board: BOARD }));
        if (s.live.streams > 0) return n;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const insert = async (n: NodeProcess, id: string, title: string) =>
    value<{ watermark: number }>(
      await rpc(n.url, 'mutate.insert', { rows: [{ id, title }] }, { board: BOARD }),
    ).watermark;
  /** The result held after each event (diffs applied), up to the first state at or past `w`. */
  let held: { watermark: number; rows: Cell[][] } | undefined;
  const until = async (conn: LiveConnection, w: number) => {
    const kinds: string[] = [];
    for (;;) {
      const item = await conn.next();
      expect(item, 'the client stream ended').toBeDefined();
      kinds.push(item!.event);
      if (item!.event === 'result') held = item!.data as { watermark: number; rows: Cell[][] };
      else if (item!.event === 'diff') {
        const d = item!.data as LiveDiffEvent;
        expect(d.from).toBe(held?.watermark);
        held = { watermark: d.watermark, rows: applyLiveDiff(held!.rows, d) };
      } else throw new Error(`unexpected ${item!.event}: ${JSON.stringify(item!.data)}`);
      if (held.watermark >= w) return { kinds, state: held };
    }
  };

  it('moves the live query to another node when its node is killed, then stopped, on the same stream', async () => {
    const w0 = await insert(nodes[0]!, 'l0', 'a');
    const conn = new LiveConnection(router.url, { sql: SQL, tables: T }, { board: BOARD });
    expect(await conn.answered()).toBe(200);
    expect(['live-a', 'live-b', 'live-c']).toContain(conn.headers['x-data-served-by']);
    expect((await until(conn, w0)).kinds[0]).toBe('result');
    const failovers = async () =>
      parseMetrics(await router.metrics.registry.metrics()).value('board_router_failovers_total') ?? 0;
    const before = await failovers();

    let alive = [...nodes];
    // Killed (SIGKILL: the stream breaks off), then stopped (SIGTERM: the node ends it cleanly).
    for (const how of ['kill', 'stop'] as const) {
      const victim = await serving(alive);
      alive = alive.filter((n) => n !== victim);
      await victim[how]();
      const w = await insert(alive[0]!, `l-${how}`, how);
      const moved = await until(conn, w);
      // The other node's first event is a whole result (the router resumed it from the last
      // watermark it relayed); the state at the write equals query.execute's.
      expect(moved.kinds[0]).toBe('result');
      const q = value<{ watermark: number; result: { rows: unknown[][] } }>(
        await rpc(alive[0]!.url, 'query.execute', { sql: SQL, tables: T }, { board: BOARD }),
      );
      expect(moved.state.watermark).toBe(q.watermark);
      expect(moved.state.rows).toEqual(q.result.rows);
      // And the stream goes on from the new node.
      const w2 = await insert(alive[0]!, `l-${how}-after`, 'a');
      await until(conn, w2);
    }
    expect(conn.ended).toBe(false);
    expect(await failovers()).toBeGreaterThanOrEqual(before + 2);
    conn.cut();
  });
});
