/**
 * Live queries (`POST /live`, `src/live/`) on a real node: under randomized writes every event of
 * every subscriber is exactly `query.execute`'s answer at that event's watermark; a stream cut at
 * any point resumes with `Last-Event-ID`; subscribers of one query share its evaluations, and the
 * queries of a board share one replica sync; a failing query ends its streams with `error`.
 */
import { applyLiveDiff, type Cell } from '@board/protocol';
import { describe, expect, it } from 'vitest';
import { boardTest, cli, LiveConnection, type LiveItem, type NodeProcess, rpc, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

/** A deterministic PRNG (mulberry32), so a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a subscriber holds after each event: the result rows at the event's watermark. */
interface Seen {
  watermark: number;
  columns: string[];
  rows: Cell[][];
  event: string;
}

/** Follows a raw live stream, applying diffs to the result held, recording every state. */
async function follow(conn: LiveConnection, until: (seen: Seen[]) => boolean): Promise<Seen[]> {
  const seen: Seen[] = [];
  let held: Seen | undefined;
  while (!until(seen)) {
    const item = await conn.next();
    if (!item) throw new Error(`stream ended after ${seen.length} events`);
    held = apply(held, item);
    seen.push(held);
  }
  return seen;
}

function apply(held: Seen | undefined, item: LiveItem): Seen {
  if (item.event === 'result') {
    const d = item.data as { watermark: number; columns: string[]; rows: Cell[][] };
    expect(item.id).toBe(String(d.watermark));
    return { watermark: d.watermark, columns: d.columns, rows: d.rows, event: 'result' };
  }
  if (item.event === 'diff') {
    const d = item.data as { watermark: number; from: number; removed: number[]; added: [number, Cell[]][] };
    expect(item.id).toBe(String(d.watermark));
    expect(held?.watermark).toBe(d.from);
    return {
      watermark: d.watermark,
      columns: held!.columns,
      rows: applyLiveDiff(held!.rows, d),
      event: 'diff',
    };
  }
  throw new Error(`unexpected event ${item.event}: ${JSON.stringify(item.data)}`);
}

describe('live queries on one node', () => {
  let node: NodeProcess;
  let env: Record<string, string>;

  boardTest.beforeAll(async ({ tempDir, startNode }) => {
    env = { BOARD_DATA_DIR: await tempDir('board-live-') };
    node = await startNode(env);
    // Created beside the running node (each command adopts its PostgreSQL), all at once.
    const created = await Promise.all(
      ['rnd', 'rnd_ref', 'cut', 'shared', 'fails'].map((b) =>
        cli(
          [
            'board',
            'create',
            b,
            '--column',
            'grp:TEXT',
            '--column',
            'points:INTEGER',
            '--column',
            'flag:BOOLEAN',
          ],
          env,
        ),
      ),
    );
    for (const r of created) expect(r.code, r.stderr).toBe(0);
  });

  const query = async (board: string, sql: string, params: Cell[] = []) =>
    value<{ watermark: number; result: { columns: string[]; rows: Cell[][] } }>(
      await rpc(node.url, 'query.execute', { sql, tables: T, params }, { board }),
    );
  const write = async (board: string, procedure: string, body: unknown) =>
    value<{ watermark: number }>(await rpc(node.url, procedure, body, { board })).watermark;

  it('gives every subscriber, at every event, the result query.execute gives at that watermark', async () => {
    const queries: { sql: string; params: Cell[]; ordered: boolean }[] = [
      {
        sql: 'SELECT grp, count(*) AS n, sum(points) AS p FROM {{t}} GROUP BY grp ORDER BY grp',
        params: [],
        ordered: true,
      },
      { sql: 'SELECT id, points FROM {{t}} WHERE points > $1 ORDER BY id', params: [50], ordered: true },
      { sql: 'SELECT id, points FROM {{t}} WHERE points > $1 ORDER BY id', params: [80], ordered: true },
      { sql: 'SELECT grp, points FROM {{t}} WHERE flag', params: [], ordered: false },
    ];
    // Three subscribers of the first query (sharing it), one of each other.
    const subs = [0, 0, 0, 1, 2, 3].map((q) => ({
      q,
      conn: new LiveConnection(
        node.url,
        { sql: queries[q]!.sql, tables: T, params: queries[q]!.params },
        { board: 'rnd' },
      ),
    }));
    const random = prng(38);
    const live = new Set<string>();
    const log: { procedure: string; body: unknown }[] = [];
    let n = 0;
    const mutation = (): { procedure: string; body: unknown } => {
      const r = random();
      const ids = [...live];
      if (r < 0.5 || ids.length < 3) {
        const rows = Array.from({ length: 1 + Math.floor(random() * 3) }, () => {
          const id = `r${n++}`;
          live.add(id);
          return {
            id,
            grp: `g${Math.floor(random() * 4)}`,
            points: Math.floor(random() * 100),
            flag: random() < 0.5,
          };
        });
        return { procedure: 'mutate.insert', body: { rows } };
      }
      if (r < 0.8) {
        const id = ids[Math.floor(random() * ids.length)]!;
        return {
          procedure: 'mutate.update',
          body: {
            updates: [
              { id, patch: { points: Math.floor(random() * 100), grp: `g${Math.floor(random() * 4)}` } },
            ],
          },
        };
      }
      const id = ids[Math.floor(random() * ids.length)]!;
      live.delete(id);
      return { procedure: 'mutate.delete', body: { ids: [id] } };
    };
    // Bursts of back-to-back writes (coalesced by the node) with pauses between them.
    let head = 0;
    for (let burst = 0; burst < 25; burst++) {
      const size = 1 + Math.floor(random() * 6);
      for (let i = 0; i < size; i++) {
        const m = mutation();
        log.push(m);
        head = await write('rnd', m.procedure, m.body);
        expect(head).toBe(log.length);
      }
      if (random() < 0.5) await new Promise((r) => setTimeout(r, 20));
    }
    const seen = await Promise.all(subs.map((s) => follow(s.conn, (x) => x.at(-1)?.watermark === head)));
    for (const s of subs) s.conn.cut();

    // The reference: the same writes replayed on another board, query.execute after each one.
    const wanted = new Set(seen.flat().map((s) => s.watermark));
    const reference = new Map<string, { columns: string[]; rows: Cell[][] }>();
    for (let w = 0; w <= log.length; w++) {
      if (w > 0) expect(await write('rnd_ref', log[w - 1]!.procedure, log[w - 1]!.body)).toBe(w);
      if (!wanted.has(w)) continue;
      for (const [qi, q] of queries.entries()) {
        const out = await query('rnd_ref', q.sql, q.params);
        expect(out.watermark).toBe(w);
        reference.set(`${qi}@${w}`, out.result);
      }
    }
    let diffs = 0;
    for (const [i, s] of subs.entries()) {
      const states = seen[i]!;
      expect(states[0]!.event).toBe('result');
      for (let k = 1; k < states.length; k++)
        expect(states[k]!.watermark).toBeGreaterThan(states[k - 1]!.watermark);
      for (const state of states) {
        const ref = reference.get(`${s.q}@${state.watermark}`)!;
        expect(state.columns).toEqual(ref.columns);
        const norm = (rows: Cell[][]) =>
          queries[s.q]!.ordered ? rows : rows.map((r) => JSON.stringify(r)).sort();
        expect(norm(state.rows), `query ${s.q} at watermark ${state.watermark}`).toEqual(norm(ref.rows));
        if (state.event === 'diff') diffs++;
      }
    }
    // Diffs were used, not only whole results.
    expect(diffs).toBeGreaterThan(10);
    // Shared work: the three subscribers of query 0 share its evaluations, so the node ran at
    // most one evaluation per query per write (plus each query's first), whatever the subscribers.
    const stats = value<{ live: { evaluations: number } }>(
      await rpc(node.url, 'node.stats', {}, { board: 'rnd' }),
    );
    expect(stats.live.evaluations).toBeLessThanOrEqual(queries.length * (log.length + 1));
  });

  it('resumes with Last-Event-ID after a cut at each point, and never goes back', async () => {
    const body = { sql: 'SELECT grp, sum(points) AS p FROM {{t}} GROUP BY grp ORDER BY grp', tables: T };
    const reference = async () => (await query('cut', body.sql)).result;
    await write('cut', 'mutate.insert', { rows: [{ id: 'c0', grp: 'a', points: 1 }] });
    let lastId: string | undefined;
    for (let point = 0; point < 6; point++) {
      const conn = new LiveConnection(node.url, body, {
        board: 'cut',
        ...(lastId ? { lastEventId: lastId } : {}),
      });
      const first = await conn.next();
      // The first event after a (re)connect is the whole result at or past the watermark resumed from.
      expect(first?.event).toBe('result');
      const w0 = (first!.data as { watermark: number }).watermark;
      if (lastId) expect(w0).toBeGreaterThanOrEqual(Number(lastId));
      let held = apply(undefined, first!);
      // `point` more events on this connection, then the cut.
      for (let k = 0; k < point; k++) {
        const w = await write('cut', 'mutate.insert', {
          rows: [{ id: `c${point}_${k}`, grp: k % 2 ? 'a' : 'b', points: k }],
        });
        do held = apply(held, (await conn.next())!);
        while (held.watermark < w);
      }
      expect(held.rows).toEqual((await reference()).rows);
      lastId = String(held.watermark);
      conn.cut();
      // A write while disconnected (every other round): the resumed stream must show it.
      if (point % 2 === 0)
        await write('cut', 'mutate.insert', { rows: [{ id: `gap${point}`, grp: 'c', points: 7 }] });
    }
    const conn = new LiveConnection(node.url, body, { board: 'cut', lastEventId: lastId! });
    const resumed = apply(undefined, (await conn.next())!);
    const head = await query('cut', body.sql);
    expect(resumed.watermark).toBe(head.watermark);
    expect(resumed.rows).toEqual(head.result.rows);
    conn.cut();
    // A resume point ahead of the board's head is refused (it was never handed out).
    const ahead = new LiveConnection(node.url, body, {
      board: 'cut',
      lastEventId: String(head.watermark + 5),
    });
    expect(await ahead.next()).toMatchObject({ event: 'error', data: { _tag: 'CursorAhead' } });
    await ahead.end();
  });

  it('shares one evaluation per watermark among subscribers, and one replica sync among queries', async () => {
    const before = value<{ live: { evaluations: number; syncs: number } }>(
      await rpc(node.url, 'node.stats', {}, { board: 'shared' }),
    ).live;
    const sqls = [
      'SELECT count(*) AS n FROM {{t}}',
      'SELECT grp, count(*) AS n FROM {{t}} GROUP BY grp ORDER BY grp',
      'SELECT max(points) AS m FROM {{t}}',
    ];
    // Ten subscribers of the first query, one of each other.
    const conns = [...Array.from({ length: 10 }, () => sqls[0]!), sqls[1]!, sqls[2]!].map(
      (sql) => new LiveConnection(node.url, { sql, tables: T }, { board: 'shared' }),
    );
    for (const c of conns) expect((await c.next())?.event).toBe('result');
    const writes = 5;
    for (let i = 0; i < writes; i++) {
      const w = await write('shared', 'mutate.insert', {
        rows: [{ id: `s${i}`, grp: `g${i % 2}`, points: i }],
      });
      // Every stream reaches this write before the next one: no coalescing, one evaluation each.
      for (const c of conns) {
        let item: LiveItem | undefined;
        do item = await c.next();
        while (item && (item.data as { watermark: number }).watermark < w);
        expect(item).toBeDefined();
      }
    }
    const after = value<{ live: { evaluations: number; syncs: number; queries: number } }>(
      await rpc(node.url, 'node.stats', {}, { board: 'shared' }),
    ).live;
    // 3 distinct queries: 3 first evaluations, then 3 per write, whatever the 12 subscribers.
    expect(after.evaluations - before.evaluations).toBe(3 * (writes + 1));
    // The replica was brought forward once per write (plus once at the start), not once per query.
    expect(after.syncs - before.syncs).toBeLessThanOrEqual(writes + 1);
    for (const c of conns) c.cut();
  });

  it('ends every stream of a query that fails later with an error event', async () => {
    await write('fails', 'mutate.insert', { rows: [{ id: 'f1', grp: '12', points: 1 }] });
    const body = { sql: 'SELECT sum(CAST(grp AS INTEGER)) AS s FROM {{t}}', tables: T };
    const a = new LiveConnection(node.url, body, { board: 'fails' });
    const b = new LiveConnection(node.url, body, { board: 'fails' });
    expect(await a.next()).toMatchObject({ event: 'result', data: { rows: [[12]] } });
    expect(await b.next()).toMatchObject({ event: 'result', data: { rows: [[12]] } });
    await write('fails', 'mutate.insert', { rows: [{ id: 'f2', grp: 'not a number', points: 1 }] });
    for (const c of [a, b]) {
      expect(await c.next()).toMatchObject({ event: 'error', data: { _tag: 'QueryFailed' } });
      await c.end();
      expect(c.ended).toBe(true);
    }
  });

  it('refuses bad input before streaming, and errors of a valid request as an event', async () => {
    const bad = new LiveConnection(node.url, { sql: 'SELECT 1', tables: T, extra: 1 }, { board: 'rnd' });
    expect(await bad.answered()).toBe(400);
    await bad.end();
    expect(JSON.parse(bad.text)).toMatchObject({ status: 'error', error: { _tag: 'InvalidInput' } });
    const badId = new LiveConnection(
      node.url,
      { sql: 'SELECT 1', tables: T },
      { board: 'rnd', lastEventId: 'x' },
    );
    expect(await badId.answered()).toBe(400);
    const unknown = new LiveConnection(node.url, { sql: 'SELECT 1', tables: T }, { board: 'nope' });
    expect(await unknown.next()).toMatchObject({ event: 'error', data: { _tag: 'UnknownBoard' } });
    const floor = new LiveConnection(
      node.url,
      { sql: 'SELECT 1', tables: T, minWatermark: 10_000 },
      { board: 'rnd' },
    );
    expect(await floor.next()).toMatchObject({ event: 'error', data: { _tag: 'WatermarkNotReached' } });
  });
});
