/**
 * `board.live()` against a real node: typed rows from SQL and from the Kysely builder, what was
 * added and removed, resuming by itself after the connection is cut at every event (each result
 * still exactly `query.execute`'s at its watermark), and a query failing later thrown as its tag.
 */
import { boardTest, cli, type NodeProcess } from '@board/server/testing';
import { expect, it } from 'vitest';
import { type BoardClient, connect, type LiveResult, type Result } from '../src/index.js';

interface Tasks {
  grp: string | null;
  points: number | null;
}

function must<T>(r: Result<T>): T {
  if (!r.ok) throw new Error(`expected ok, got ${r.error._tag}: ${r.error.message}`);
  return r.value;
}

/** Takes results from a live iterator until `stop` says so. */
async function take<R>(
  it: AsyncIterableIterator<LiveResult<R>>,
  stop: (r: LiveResult<R>) => boolean,
): Promise<LiveResult<R>[]> {
  const out: LiveResult<R>[] = [];
  for (;;) {
    const next = await it.next();
    if (next.done) throw new Error('the live iteration ended');
    out.push(next.value);
    if (stop(next.value)) return out;
  }
}

let node: NodeProcess;
let tasks: BoardClient<Tasks>;

boardTest.beforeAll(async ({ tempDir, startNode }) => {
  const env = { BOARD_DATA_DIR: await tempDir('client-live-') };
  node = await startNode(env);
  const r = await cli(
    ['board', 'create', 'tasks', '--column', 'grp:TEXT', '--column', 'points:INTEGER'],
    env,
  );
  expect(r.code, r.stderr).toBe(0);
  tasks = connect<Tasks>({ url: node.url }).board('tasks');
});

it('yields typed results, from SQL and from the builder, with what was added and removed', async () => {
  must(
    await tasks.insertMany([
      { id: 'a', grp: 'x', points: 1 },
      { id: 'b', grp: 'y', points: 2 },
    ]),
  );
  const ctl = new AbortController();
  const bySql = tasks.live<{ grp: string; total: number }>(
    'SELECT grp, sum(points)::INTEGER AS total FROM {{items}} GROUP BY grp ORDER BY grp',
    { signal: ctl.signal },
  );
  const byBuilder = tasks.live(tasks.select(['id', 'points']).where('points', '>', 1).orderBy('id'), {
    signal: ctl.signal,
  });
  const [first] = await take(bySql, () => true);
  expect(first!.rows).toEqual([
    { grp: 'x', total: 1 },
    { grp: 'y', total: 2 },
  ]);
  expect(first!.added).toEqual(first!.rows);
  expect(first!.result.columns).toEqual(['grp', 'total']);
  const [b0] = await take(byBuilder, () => true);
  expect(b0!.rows).toEqual([{ id: 'b', points: 2 }]);
  // The builder's row type is the selection.
  const typed: { id: string; points: number | null }[] = b0!.rows;
  expect(typed).toHaveLength(1);

  const w = must(await tasks.update('a', { points: 5 }));
  const s = await take(bySql, (r) => r.watermark >= w);
  const last = s.at(-1)!;
  expect(last.rows).toEqual([
    { grp: 'x', total: 5 },
    { grp: 'y', total: 2 },
  ]);
  expect(last.removed).toEqual([{ grp: 'x', total: 1 }]);
  expect(last.added).toEqual([{ grp: 'x', total: 5 }]);
  const b = (await take(byBuilder, (r) => r.watermark >= w)).at(-1)!;
  expect(b.rows).toEqual([
    { id: 'a', points: 5 },
    { id: 'b', points: 2 },
  ]);
  const q = must(await tasks.query('SELECT id, points FROM {{items}} WHERE points > 1 ORDER BY id'));
  expect(b.result.rows).toEqual(q.result.rows);
  ctl.abort();
  expect((await bySql.next()).done).toBe(true);
});

it('resumes by itself after the connection is cut at every event, missing no state', async () => {
  // A transport that breaks each live response off right after its first event.
  let connects = 0;
  let lastEventIds: (string | null)[] = [];
  const cutting: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (!String(input).endsWith('/live') || !res.body) return res;
    connects++;
    lastEventIds.push(new Headers(init?.headers).get('last-event-id'));
    const reader = res.body.getReader();
    let text = '';
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        const { done, value } = await reader.read();
        if (done) return ctl.close();
        ctl.enqueue(value);
        text += new TextDecoder().decode(value);
        if (/\nid: \d+\n\n/.test(text)) {
          await reader.cancel();
          ctl.error(new Error('cut by the test'));
        }
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  const board = connect<Tasks>({ url: node.url, fetch: cutting, retry: { times: 5, delayMs: 10 } }).board(
    'tasks',
  );
  const ctl = new AbortController();
  const sql = 'SELECT grp, count(*)::INTEGER AS n FROM {{items}} GROUP BY grp ORDER BY grp';
  const it = board.live<{ grp: string; n: number }>(sql, { signal: ctl.signal });
  const seen: LiveResult<{ grp: string; n: number }>[] = [];
  seen.push(...(await take(it, () => true)));
  lastEventIds = [];
  for (let i = 0; i < 6; i++) {
    const w = must(await tasks.insert({ id: `c${i}`, grp: i % 2 ? 'x' : 'z', points: i }));
    seen.push(...(await take(it, (r) => r.watermark >= w)));
    // The state at this watermark, read by query.execute now (no write happened since).
    const q = must(await tasks.query(sql));
    expect(q.watermark).toBe(w);
    expect(seen.at(-1)!.result.rows).toEqual(q.result.rows);
  }
  for (let k = 1; k < seen.length; k++) expect(seen[k]!.watermark).toBeGreaterThan(seen[k - 1]!.watermark);
  // Each reconnect resumed from the watermark last yielded.
  expect(connects).toBeGreaterThanOrEqual(7);
  expect(lastEventIds.every((id) => id !== null && Number(id) >= seen[0]!.watermark)).toBe(true);
  ctl.abort();
});

it('throws the error of a query that fails later, by its tag', async () => {
  must(await tasks.insert({ id: 'n1', grp: '7' }));
  const it = tasks.live('SELECT sum(CAST(grp AS INTEGER)) AS s FROM {{items}} WHERE id LIKE $1', {
    params: ['n%'],
  });
  expect((await it.next()).value?.rows).toEqual([{ s: 7 }]);
  must(await tasks.insert({ id: 'n2', grp: 'seven' }));
  await expect(it.next()).rejects.toMatchObject({ _tag: 'QueryFailed' });
});
