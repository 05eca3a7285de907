/**
 * The client against a real board-node process, once per store (embedded, and a PostgreSQL server
 * reached through DATABASE_URL): every method, the builder, errors, transport retries and headers,
 * the floor across two nodes (server store), watch through a node restart, abort.
 */

import { boardTest, cli, type NodeProcess, nodeEnv, startNode, TOKEN_SECRET } from '@board/server/testing';
import { describeStore, removeDataDir, STORES, type TestStore, tempDir } from '@support/pg/testing';
import { afterAll, expect, it } from 'vitest';
import { type BoardClient, BoardError, type ChangeRecord, connect, type Result } from '../src/index.js';
import { flakyFetch, token } from './helpers.js';

interface Tasks {
  title: string | null;
  points: number | null;
}

function must<T>(r: Result<T>): T {
  if (!r.ok) throw new Error(`expected ok, got ${r.error._tag}: ${r.error.message}`);
  return r.value;
}

function tagOf<T>(r: Result<T>): string {
  return r.ok ? 'ok' : r.error._tag;
}

for (const storeName of STORES) {
  describeStore(storeName)(`board-client on the ${storeName} store`, () => {
    let store: TestStore;
    let node: NodeProcess;
    let env: Record<string, string>;
    const dirs: string[] = [];
    const nodes: NodeProcess[] = [];
    let admin: string;
    let tasks: BoardClient<Tasks>;

    boardTest.beforeAll(async ({ openStore }) => {
      store = await openStore(storeName);
      const dataDir = await tempDir('board-client-');
      dirs.push(dataDir);
      env = { ...nodeEnv(store, dataDir), BOARD_TOKEN_SECRET: TOKEN_SECRET };
      for (const b of ['tasks', 'other']) {
        const created = await cli(
          ['board', 'create', b, '--column', 'title:TEXT', '--column', 'points:INTEGER'],
          env,
        );
        expect(created.code, created.stderr).toBe(0);
      }
      node = await startNode({ ...env, BOARD_AUTH: 'on', BOARD_NODE_ID: `client-${storeName}` });
      nodes.push(node);
      admin = token(TOKEN_SECRET, { '*': ['read', 'write'] });
      tasks = connect<Tasks>({ url: node.url, token: admin }).board('tasks');
    });

    afterAll(async () => {
      for (const n of nodes) await n.stop();
      for (const d of dirs) await removeDataDir(d);
    });

    it('validates the board id client-side', () => {
      const conn = connect({ url: node.url, token: admin });
      for (const bad of ['', 'a-b', 'x'.repeat(65), 'a b', 'é']) {
        expect(() => conn.board(bad)).toThrow(BoardError);
        try {
          conn.board(bad);
        } catch (err) {
          expect((err as BoardError)._tag).toBe('InvalidBoardId');
        }
      }
      expect(conn.board('A_z9').boardId).toBe('A_z9');
    });

    it('inserts, updates and deletes, each returning the committed watermark', async () => {
      const w1 = must(await tasks.insert({ id: 'm1', title: 'one', points: 1 }));
      const w2 = must(
        await tasks.insertMany([
          { id: 'm2', title: 'two', points: 2 },
          { id: 'm3', title: 'three', state: 'open' },
        ]),
      );
      const w3 = must(await tasks.update('m1', { state: 'done', points: 10 }));
      const w4 = must(
        await tasks.updateMany([
          { id: 'm2', patch: { title: 'TWO' } },
          { id: 'm3', patch: { points: 3 } },
        ]),
      );
      const w5 = must(await tasks.delete('m3'));
      const w6 = must(await tasks.deleteMany(['m2', 'missing']));
      expect([w2, w3, w4, w5, w6]).toEqual([w1 + 1, w1 + 2, w1 + 3, w1 + 4, w1 + 5]);
      const out = must(
        await tasks.query(
          'SELECT id, state, title, points, updated_at FROM {{items}} WHERE id LIKE $1 ORDER BY id',
          {
            params: ['m%'],
          },
        ),
      );
      expect(out.result.columns).toEqual(['id', 'state', 'title', 'points', 'updated_at']);
      expect(out.result.rows.map((r) => r.slice(0, 4))).toEqual([['m1', 'done', 'one', 10]]);
      const updatedAt = out.result.rows[0]?.[4];
      expect(typeof updatedAt).toBe('number');
      // epoch microseconds: within a day of now
      expect(Math.abs((updatedAt as number) / 1000 - Date.now())).toBeLessThan(86_400_000);
      expect(out.watermark).toBeGreaterThanOrEqual(w6);
    });

    it('query returns the outcome plus servedBy (the node id), and lastRead reports it', async () => {
      const fresh = connect<Tasks>({ url: node.url, token: admin }).board('tasks');
      expect(fresh.lastRead()).toEqual({ watermark: null, servedBy: null, cache: null });
      const out = must(await fresh.query('SELECT count(*) AS n FROM {{items}}'));
      expect(out.servedBy).toBe(`client-${storeName}`);
      expect(['hit', 'rebuild', 'reattach']).toContain(out.cache);
      expect(typeof out.syncMs).toBe('number');
      expect(out.sync.to).toBe(out.watermark);
      expect(fresh.lastRead()).toEqual({
        watermark: out.watermark,
        servedBy: `client-${storeName}`,
        cache: out.cache,
      });
    });

    it('returns typed errors with the wire tag and message, never throwing', async () => {
      const dup = await tasks.insert({ id: 'e1' });
      expect(tagOf(dup)).toBe('ok');
      const again = await tasks.insert({ id: 'e1' });
      expect(again.ok).toBe(false);
      if (!again.ok) {
        expect(again.error).toBeInstanceOf(BoardError);
        expect(again.error._tag).toBe('DuplicateRow');
        expect(again.error.message).not.toBe('');
      }
      expect(tagOf(await tasks.update('nope', { title: 'x' }))).toBe('RowNotFound');
      expect(tagOf(await tasks.query('SELEC nonsense'))).toMatch(/QueryFailed|QueryRefused/);
      expect(tagOf(await tasks.query('SELECT * FROM {{items}}', { minWatermark: 1e9 }))).toBe(
        'WatermarkNotReached',
      );
      const anon = connect({ url: node.url }).board('tasks');
      const un = await anon.query('SELECT 1');
      expect(tagOf(un)).toBe('Unauthenticated');
      if (!un.ok) expect(un.error.status).toBe(401);
      const reader = connect({ url: node.url, token: token(TOKEN_SECRET, { tasks: ['read'] }) }).board(
        'tasks',
      );
      expect(tagOf(await reader.query('SELECT 1'))).toBe('ok');
      expect(tagOf(await reader.insert({ id: 'r1' }))).toBe('Forbidden');
      expect(tagOf(await connect({ url: node.url, token: admin }).board('nosuch').query('SELECT 1'))).toBe(
        'UnknownBoard',
      );
    });

    it('builds queries with where, order, limit, joins and subqueries, compiled to {{items}} placeholders', async () => {
      must(
        await tasks.insertMany([
          { id: 'b1', title: 'alpha', points: 5, state: 'b2' },
          { id: 'b2', title: 'beta', points: 7, state: 'b1' },
          { id: 'b3', title: 'gamma', points: 1 },
        ]),
      );
      const rows = await tasks
        .select(['id', 'points'])
        .where('id', 'like', 'b%')
        .where('points', '>', 1)
        .orderBy('points', 'desc')
        .limit(5)
        .execute();
      expect(rows).toEqual([
        { id: 'b2', points: 7 },
        { id: 'b1', points: 5 },
      ]);
      const all = await tasks.selectAll().where('id', '=', 'b3').execute();
      expect(all).toHaveLength(1);
      expect(all[0]).toMatchObject({ id: 'b3', title: 'gamma', points: 1, state: null });
      expect(typeof all[0]?.updated_at).toBe('number');

      const compiled = tasks.selectAll().where('id', '=', 'x').compile();
      expect(compiled.sql).toBe('select * from {{items}} where "id" = $1');

      const joined = await tasks.db
        .selectFrom('items as a')
        .innerJoin('items as b', 'b.id', 'a.state')
        .select(['a.id as aid', 'b.title as partner'])
        .where('a.id', 'in', ['b1', 'b2'])
        .orderBy('a.id')
        .execute();
      expect(joined).toEqual([
        { aid: 'b1', partner: 'beta' },
        { aid: 'b2', partner: 'alpha' },
      ]);

      const sub = await tasks.db
        .selectFrom('items')
        .select(['id'])
        .where('id', 'like', 'b%')
        .where('points', '=', (eb) =>
          eb
            .selectFrom('items')
            .select((e) => e.fn.max('points').as('m'))
            .where('id', 'like', 'b%'),
        )
        .execute();
      expect(sub).toEqual([{ id: 'b2' }]);
    });

    it('builder execute() rejects with the BoardError (Kysely convention); transactions and streaming throw prefixed messages', async () => {
      await expect(tasks.atLeast(1e9).selectAll().execute()).rejects.toMatchObject({
        _tag: 'WatermarkNotReached',
      });
      await expect(tasks.db.transaction().execute(async () => undefined)).rejects.toThrow(
        /^board-client: transactions are not supported on the read path/,
      );
      const stream = tasks.selectAll().stream();
      await expect(stream.next()).rejects.toThrow(/^board-client: streaming is not supported/);
    });

    it('atLeast returns a new client with a floor; the original is unchanged', async () => {
      const w = must(await tasks.insert({ id: 'f1' }));
      const floored = tasks.atLeast(w);
      expect(floored).not.toBe(tasks);
      expect(floored.floor).toBe(w);
      expect(tasks.floor).toBeUndefined();
      expect(floored.atLeast(w - 1).floor).toBe(w);
      const out = must(await floored.query('SELECT id FROM {{items}} WHERE id = $1', { params: ['f1'] }));
      expect(out.result.rows).toEqual([['f1']]);
      expect(out.watermark).toBeGreaterThanOrEqual(w);
      expect(tagOf(await tasks.atLeast(w + 1000).query('SELECT 1'))).toBe('WatermarkNotReached');
      // An explicit minWatermark raises the floor for one read, and never lowers it.
      expect(tagOf(await tasks.atLeast(w + 1000).query('SELECT 1', { minWatermark: w }))).toBe(
        'WatermarkNotReached',
      );
      expect(tagOf(await tasks.atLeast(w).query('SELECT 1', { minWatermark: w + 1000 }))).toBe(
        'WatermarkNotReached',
      );
      expect(tagOf(await tasks.atLeast(w).query('SELECT 1', { minWatermark: 0 }))).toBe('ok');
    });

    it('stats calls node.stats', async () => {
      const s = must(await tasks.stats());
      expect(s.nodeId).toBe(`client-${storeName}`);
      expect(s.boards).toEqual(expect.arrayContaining(['tasks', 'other']));
    });

    it('retries reads after transport failures (times N), and gives up after N', async () => {
      const ok = flakyFetch(2);
      const c = connect({
        url: node.url,
        token: admin,
        fetch: ok.fetch,
        retry: { times: 2, delayMs: 1 },
      }).board('tasks');
      expect(tagOf(await c.query('SELECT 1'))).toBe('ok');
      expect(ok.seen).toHaveLength(3);
      const bad = flakyFetch(3);
      const d = connect({
        url: node.url,
        token: admin,
        fetch: bad.fetch,
        retry: { times: 2, delayMs: 1 },
      }).board('tasks');
      expect(tagOf(await d.query('SELECT 1'))).toBe('TransportFailed');
      expect(bad.seen).toHaveLength(3);
      const off = flakyFetch(1);
      const e = connect({
        url: node.url,
        token: admin,
        fetch: off.fetch,
        retry: { times: 0, delayMs: 1 },
      }).board('tasks');
      expect(tagOf(await e.stats())).toBe('TransportFailed');
      expect(off.seen).toHaveLength(1);
    });

    it('never retries an unkeyed write; retries a keyed one, applied exactly once', async () => {
      const unkeyed = flakyFetch(1);
      const c = connect({
        url: node.url,
        token: admin,
        fetch: unkeyed.fetch,
        retry: { times: 5, delayMs: 1 },
      }).board('tasks');
      expect(tagOf(await c.insert({ id: 'u1' }))).toBe('TransportFailed');
      expect(unkeyed.seen).toHaveLength(1);

      // A write that reached the server and was rejected is not retried either.
      const rejected = flakyFetch(0);
      const r = connect({
        url: node.url,
        token: admin,
        fetch: rejected.fetch,
        retry: { times: 5, delayMs: 1 },
      }).board('tasks');
      expect(tagOf(await r.insert({ id: 'e1' }))).toBe('DuplicateRow');
      expect(rejected.seen).toHaveLength(1);

      const keyed = flakyFetch(2);
      const k = connect({
        url: node.url,
        token: admin,
        fetch: keyed.fetch,
        retry: { times: 2, delayMs: 1 },
      }).board('tasks');
      const w = must(await k.insert({ id: 'k1' }, { idempotencyKey: 'key-k1' }));
      expect(keyed.seen).toHaveLength(3);
      // the repeat answers the original acknowledgement, applying nothing
      expect(must(await tasks.insert({ id: 'k1' }, { idempotencyKey: 'key-k1' }))).toBe(w);
      const n = must(await tasks.query('SELECT count(*) FROM {{items}} WHERE id = $1', { params: ['k1'] }));
      expect(n.result.rows).toEqual([[1]]);
    });

    it('sets x-data-idempotent exactly when the body carries an idempotencyKey', async () => {
      const rec = flakyFetch(0);
      const c = connect({ url: node.url, token: admin, fetch: rec.fetch }).board('tasks');
      must(await c.insert({ id: 'h1' }));
      must(await c.insert({ id: 'h2' }, { idempotencyKey: 'key-h2' }));
      must(await c.update('h1', { title: 't' }, { idempotencyKey: 'key-h1' }));
      must(await c.delete('h2'));
      must(await c.query('SELECT 1'));
      must(await c.stats());
      expect(rec.seen).toHaveLength(6);
      for (const s of rec.seen) {
        const keyed = s.body !== undefined && 'idempotencyKey' in JSON.parse(s.body);
        expect(s.headers.get('x-data-idempotent')).toBe(keyed ? 'true' : null);
        expect(s.headers.get('x-data-board')).toBe('tasks');
        expect(s.headers.get('authorization')).toBe(`Bearer ${admin}`);
        expect(s.headers.get('content-type')).toBe('application/json');
      }
      expect(rec.seen.filter((s) => s.headers.get('x-data-idempotent') === 'true')).toHaveLength(2);
    });

    it('takes servedBy from x-data-served-by when a router answers', async () => {
      const viaRouter: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        const headers = new Headers(res.headers);
        headers.set('x-data-served-by', 'node-behind-router');
        return new Response(await res.text(), { status: res.status, headers });
      };
      const c = connect({ url: node.url, token: admin, fetch: viaRouter }).board('tasks');
      expect(must(await c.query('SELECT 1')).servedBy).toBe('node-behind-router');
      expect(c.lastRead().servedBy).toBe('node-behind-router');
    });

    it('times out a request past the deadline with TransportTimeout', async () => {
      const hang: typeof fetch = (_input, init) =>
        new Promise((_res, rej) => {
          init?.signal?.addEventListener('abort', () => rej(init.signal?.reason), { once: true });
        });
      const c = connect({
        url: node.url,
        token: admin,
        fetch: hang,
        timeoutMs: 20,
        retry: { times: 1, delayMs: 1 },
      }).board('tasks');
      const r = await c.query('SELECT 1');
      expect(tagOf(r)).toBe('TransportTimeout');
    });

    it('watch yields change records after a watermark, and abort ends the iteration', async () => {
      const w0 = must(await tasks.insert({ id: 'w0' }));
      const ctl = new AbortController();
      const seen: ChangeRecord[] = [];
      const done = (async () => {
        for await (const ev of tasks.watch({ after: w0, signal: ctl.signal })) {
          if (!ev.resync) seen.push(...ev.records);
          if (seen.length >= 3) ctl.abort();
        }
      })();
      const w1 = must(await tasks.insert({ id: 'w1', title: 'x' }));
      const w2 = must(await tasks.update('w1', { title: 'y' }));
      const w3 = must(await tasks.delete('w1'));
      await done; // ends because the signal aborted
      expect(seen.map((r) => [r.seq, r.kind])).toEqual([
        [w1, 'insert'],
        [w2, 'update'],
        [w3, 'delete'],
      ]);
    });

    it('watch without after starts at the head; a server error event is thrown', async () => {
      const before = must(await tasks.insert({ id: 'wh0' }));
      const ctl = new AbortController();
      const it = tasks.watch({ signal: ctl.signal });
      const first = it.next();
      // The stream starts at the head it reads when it connects, which the test cannot observe: keep
      // writing until the first record arrives. Whatever it is, it is one of these writes, never the
      // history at or before `before`.
      const written: number[] = [];
      let arrived = false;
      void first.finally(() => {
        arrived = true;
      });
      for (let i = 1; !arrived && i <= 100; i++) {
        written.push(must(await tasks.insert({ id: `wh${i}` })));
        await new Promise((r) => setTimeout(r, 100));
      }
      const ev = await first;
      ctl.abort();
      expect(ev.done).toBe(false);
      const records = ev.value?.records ?? [];
      expect(ev.value?.resync).toBe(false);
      expect(records.length).toBeGreaterThan(0);
      for (const r of records) {
        expect(r.seq).toBeGreaterThan(before);
        expect(written).toContain(r.seq);
        expect(r.kind).toBe('insert');
      }
      const unknown = connect({ url: node.url, token: admin }).board('nosuch').watch({ after: 0 });
      await expect(unknown.next()).rejects.toMatchObject({ _tag: 'UnknownBoard' });
    });

    /**
     * Writes `<prefix>0` and `<prefix>1`, watches after the first through a client with `options`,
     * and expects the first event to be the second write.
     */
    const expectNextWrite = async (prefix: string, options: { fetch: typeof fetch; timeoutMs?: number }) => {
      const w0 = must(await tasks.insert({ id: `${prefix}0` }));
      const w1 = must(await tasks.insert({ id: `${prefix}1` }));
      const c = connect({ url: node.url, token: admin, ...options }).board('tasks');
      const ctl = new AbortController();
      const it = c.watch({ after: w0, signal: ctl.signal });
      const first = await it.next();
      ctl.abort();
      expect(first.value).toEqual({ resync: false, records: [expect.objectContaining({ seq: w1 })] });
    };

    it('watch reconnects when a connection hangs without answering (watchdog at timeoutMs)', async () => {
      let calls = 0;
      const hangOnce: typeof fetch = (input, init) => {
        if (String(input).includes('/watch') && calls++ === 0) {
          return new Promise((_res, rej) => {
            init?.signal?.addEventListener('abort', () => rej(init.signal?.reason), { once: true });
          });
        }
        return fetch(input, init);
      };
      await expectNextWrite('dog', { fetch: hangOnce, timeoutMs: 100 });
      expect(calls).toBe(2);
    });

    it('watch reconnects after a 5xx without an envelope (a proxy), as after any transport failure', async () => {
      let calls = 0;
      const badGatewayOnce: typeof fetch = async (input, init) => {
        if (String(input).includes('/watch') && calls++ === 0) {
          return new Response('<html>502 Bad Gateway</html>', { status: 502 });
        }
        return await fetch(input, init);
      };
      await expectNextWrite('gw', { fetch: badGatewayOnce });
      expect(calls).toBe(2);
    });

    it('an aborted signal gives Aborted, without retries', async () => {
      const rec = flakyFetch(0);
      const c = connect({ url: node.url, token: admin, fetch: rec.fetch }).board('tasks');
      const ctl = new AbortController();
      ctl.abort();
      expect(tagOf(await c.query('SELECT 1', { signal: ctl.signal }))).toBe('Aborted');
      expect(tagOf(await c.insert({ id: 'ab1' }, { idempotencyKey: 'ab1', signal: ctl.signal }))).toBe(
        'Aborted',
      );
      expect(rec.seen).toHaveLength(0);
    });

    it('watch ends when the server closes the stream (token expiry), without reconnecting', async () => {
      const now = Math.floor(Date.now() / 1000);
      // exp two seconds ahead: the node ends the stream when it passes
      const short = token(TOKEN_SECRET, { tasks: ['read'] }, { exp: now + 2 });
      const rec = flakyFetch(0);
      const c = connect({ url: node.url, token: short, fetch: rec.fetch }).board('tasks');
      const events = [];
      for await (const ev of c.watch({ after: 0 })) events.push(ev);
      expect(rec.seen.filter((s) => s.url.includes('/watch'))).toHaveLength(1);
    });

    // Two nodes on one database: only the server store is shared between processes.
    if (storeName === 'server') {
      it('atLeast after a write on another node sharing the PostgreSQL', async () => {
        const dir = await tempDir('board-client-b-');
        dirs.push(dir);
        const b = await startNode({
          ...nodeEnv(store, dir),
          BOARD_TOKEN_SECRET: TOKEN_SECRET,
          BOARD_AUTH: 'on',
          BOARD_NODE_ID: 'client-b',
        });
        nodes.push(b);
        const onB = connect<Tasks>({ url: b.url, token: admin }).board('tasks');
        must(await onB.query('SELECT 1')); // warm B's replica before the write
        const w = must(await tasks.insert({ id: 'floor1', title: 'on A' }));
        const out = must(
          await onB.atLeast(w).query('SELECT title FROM {{items}} WHERE id = $1', { params: ['floor1'] }),
        );
        expect(out.servedBy).toBe('client-b');
        expect(out.watermark).toBeGreaterThanOrEqual(w);
        expect(out.result.rows).toEqual([['on A']]);
        const rows = await onB.atLeast(w).select(['title']).where('id', '=', 'floor1').execute();
        expect(rows).toEqual([{ title: 'on A' }]);
      });
    }

    it('a consumer that reads too slowly gets SlowConsumer thrown after its records, and resumes from its last seq', async () => {
      const small = await startNode({
        ...env,
        BOARD_AUTH: 'on',
        BOARD_NODE_ID: `client-slow-${storeName}`,
        BOARD_WATCH_BUFFER_BYTES: String(64 * 1024),
      });
      nodes.push(small);
      const cutOff = async () => {
        const text = await (await fetch(`${small.url}/metrics`)).text();
        return Number(/^board_node_watch_slow_consumers_total (\d+)/m.exec(text)?.[1]);
      };
      const c = connect<Tasks>({ url: small.url, token: admin }).board('other');
      const w0 = must(await c.insert({ id: 'slow-0' }));
      const ctl = new AbortController();
      const seen: number[] = [];
      let release = () => {};
      const released = new Promise<void>((r) => {
        release = r;
      });
      let target = Number.POSITIVE_INFINITY;
      const thrown: string[] = [];
      const done = (async () => {
        for (;;) {
          try {
            for await (const ev of c.watch({ after: seen.at(-1) ?? w0, signal: ctl.signal })) {
              // The consumer stalls on its first batch until the node has cut its stream off.
              if (seen.length === 0) await released;
              if (!ev.resync) seen.push(...ev.records.map((r) => r.seq));
              if ((seen.at(-1) ?? 0) >= target) ctl.abort();
            }
            return;
          } catch (err) {
            // The spec's rule: a server error event is thrown; resuming after the last seq loses nothing.
            thrown.push((err as BoardError)._tag);
          }
        }
      })();
      const title = 'x'.repeat(32 * 1024);
      const expected: number[] = [];
      for (let i = 0; i < 1500 && (await cutOff()) === 0; i++) {
        expected.push(must(await c.insert({ id: `slow-${i + 1}`, title })));
      }
      expect(await cutOff()).toBe(1);
      target = expected.at(-1) ?? 0;
      release();
      await done;
      expect(thrown).toEqual(['SlowConsumer']);
      // Every record once, in order, across the cut and the resume.
      expect(seen).toEqual(expected);
    });

    it('watch resumes through a node restart (SIGKILL) without losing or repeating records', async () => {
      const port = new URL(node.url).port;
      // default options: the reconnect window (timeoutMs, 10 s) rides out the restart
      const c = connect<Tasks>({ url: node.url, token: admin }).board('tasks');
      const w0 = must(await tasks.insert({ id: 'r0' }));
      const ctl = new AbortController();
      const seen: ChangeRecord[] = [];
      const expected: number[] = [];
      let wake = () => {};
      let resolveFirst!: () => void;
      const first = new Promise<void>((r) => {
        resolveFirst = r;
      });
      const done = (async () => {
        for await (const ev of c.watch({ after: w0, signal: ctl.signal })) {
          if (!ev.resync) seen.push(...ev.records);
          if (seen.length === 1) resolveFirst();
          wake();
        }
      })();
      expected.push(must(await tasks.insert({ id: 'r1' })));
      await first;
      await node.kill();
      // Written while the watched node is down (on another node of the shared PostgreSQL) when
      // there is one: only a resume from the last seen watermark delivers it.
      const other = nodes.find((n) => n !== node && n.proc.exitCode === null);
      if (other) {
        expected.push(
          must(await connect({ url: other.url, token: admin }).board('tasks').insert({ id: 'r2' })),
        );
      }
      node = await startNode({
        ...env,
        BOARD_AUTH: 'on',
        BOARD_NODE_ID: `client-${storeName}`,
        BOARD_PORT: port,
      });
      nodes.push(node);
      while (expected.length < 4) expected.push(must(await tasks.insert({ id: `r${expected.length + 1}` })));
      const allSeen = () => expected.every((w) => seen.some((r) => r.seq === w));
      while (!allSeen()) {
        await new Promise<void>((r) => {
          wake = r;
        });
      }
      ctl.abort();
      await done;
      expect(seen.map((r) => r.seq)).toEqual(expected);
    });
  });
}
