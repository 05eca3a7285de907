import { readFileSync } from 'node:fs';
/**
 * Integration suite on a real board-node process, run once per store: the embedded default and a
 * PostgreSQL server reached through DATABASE_URL.
 */
import { connect } from 'node:net';
import { boardAdmin, createLogger, mintToken, openStore } from '@board/server';
import { describeStore, removeDataDir, STORES, type TestStore, tempDir } from '@support/pg/testing';
import { malformedAnswers } from '@support/server/testing';
import { decodeJwt } from 'jose';
import { expect, it } from 'vitest';
import {
  boardTest,
  cli,
  events,
  type NodeProcess,
  nodeEnv,
  rpc,
  startNode,
  TOKEN_SECRET,
  tag,
  value,
  watch,
} from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
const INVALID_INPUT = { status: 'error', error: { _tag: 'InvalidInput' } };
type Outcome = {
  result: { columns: string[]; rows: unknown[][] };
  cache: string;
  sync: { mode: string; from: number; to: number; applied: number };
  watermark: number;
  syncMs: number;
  queryMs: number;
};

for (const storeName of STORES) {
  describeStore(storeName)(`board-node on the ${storeName} store`, () => {
    let store: TestStore;
    let node: NodeProcess;
    let dataDir: string;
    let env: Record<string, string>;
    let admin: string;
    const q = (board: string, sql: string, extra: Record<string, unknown> = {}, token = admin) =>
      rpc(node.url, 'query.execute', { sql, tables: T, ...extra }, { board, token });
    const insert = (board: string, rows: unknown[], extra: Record<string, unknown> = {}) =>
      rpc(node.url, 'mutate.insert', { rows, ...extra }, { board, token: admin });

    boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
      store = await openStore(storeName);
      dataDir = await tempDir('board-it-');
      env = { ...nodeEnv(store, dataDir), BOARD_TOKEN_SECRET: TOKEN_SECRET };
      const created = await cli(
        [
          'board',
          'create',
          'tasks',
          '--column',
          'title:TEXT',
          '--column',
          'points:INTEGER',
          '--column',
          'score:DOUBLE',
          '--column',
          'done:BOOLEAN',
          '--column',
          'due:TIMESTAMP',
        ],
        env,
      );
      expect(created.stderr).toBe('');
      expect(created.code).toBe(0);
      for (const b of ['other', 'evict1', 'evict2', 'schema']) {
        expect((await cli(['board', 'create', b, '--column', 'title:TEXT'], env)).code).toBe(0);
      }
      node = await startNode({
        ...env,
        BOARD_AUTH: 'on',
        BOARD_HEARTBEAT_MS: '300',
        BOARD_REPLICA_MAX_OPEN: '2',
      });
      admin = await mintToken(TOKEN_SECRET, { boards: ['*'], verbs: ['read', 'write'], ttlSec: 3600 });
    });

    it('answers /health without auth and without engine work', async () => {
      const res = await fetch(`${node.url}/health`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { ok: boolean; nodeId: string; version: string };
      expect(body.ok).toBe(true);
      expect(typeof body.nodeId).toBe('string');
      const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
        version: string;
      };
      expect(body.version).toBe(version);
      // The stdout line (the JSON log line carries it too, at level info; the test node logs warn).
      expect(node.output()).toMatch(
        new RegExp(`listening on \\S+ \\(\\w+ store, version ${version.replace(/\./g, '\\.')}\\)`),
      );
    });

    it('takes its options as flags too, flags winning over the environment', async () => {
      const dir2 = await tempDir('board-flags-');
      const flagged = await startNode({ ...nodeEnv(store, dir2), BOARD_NODE_ID: 'from-env' }, [
        '--port',
        '0',
        '--node-id',
        'from-flag',
        '--auth',
        'off',
      ]);
      try {
        expect(await (await fetch(`${flagged.url}/health`)).json()).toEqual({
          ok: true,
          nodeId: 'from-flag',
          version: expect.any(String),
        });
      } finally {
        await flagged.stop();
        await removeDataDir(dir2);
      }
      const bad = await cli(['--port', 'seventy'], { ...env, BOARD_POLL_MS: '5000', BOARD_AUTH: 'maybe' });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/^board-node: invalid configuration:\n/);
      for (const name of ['BOARD_PORT (--port)', 'BOARD_POLL_MS (--poll-ms)', 'BOARD_AUTH (--auth)']) {
        expect(bad.stderr).toContain(`  - ${name}: `);
      }
      const badSub = await cli(['board', 'list', '--retention-max-changes', '0'], env);
      expect(badSub.code).toBe(2);
      expect(badSub.stderr).toContain('BOARD_RETENTION_MAX_CHANGES (--retention-max-changes)');
      const unknown = await cli(['--prot', '1'], env);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain("unknown option '--prot'");
    });

    it('board list shows boards, their columns and watermarks', async () => {
      const list = await cli(['board', 'list'], env);
      expect(list.code).toBe(0);
      expect(list.stdout).toContain('tasks\twatermark');
      expect(list.stdout).toContain('due:TIMESTAMP');
      const again = await cli(['board', 'create', 'tasks'], env);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('BoardExists');
      const bad = await cli(['board', 'create', 'no-dash'], env);
      expect(bad.stderr).toContain('InvalidBoardId');
      const badCol = await cli(['board', 'create', 'x1', '--column', 'n:WHATEVER'], env);
      expect(badCol.code).toBe(1);
    });

    it('applies the Errors table before any handler runs', async () => {
      const noToken = await rpc(node.url, 'node.stats', {}, { board: 'tasks' });
      expect([noToken.status, tag(noToken)]).toEqual([401, 'Unauthenticated']);
      const badToken = await rpc(node.url, 'node.stats', {}, { board: 'tasks', token: 'x.y.z' });
      expect([badToken.status, tag(badToken)]).toEqual([401, 'Unauthenticated']);
      const expired = await mintToken(TOKEN_SECRET, {
        boards: ['tasks'],
        verbs: ['read'],
        ttlSec: 1,
        now: Date.now() - 10_000,
      });
      expect(tag(await rpc(node.url, 'node.stats', {}, { board: 'tasks', token: expired }))).toBe(
        'Unauthenticated',
      );
      const forged = await mintToken('another-secret-another-secret-another-secret', {
        boards: ['*'],
        verbs: ['read'],
        ttlSec: 60,
      });
      expect(tag(await rpc(node.url, 'node.stats', {}, { board: 'tasks', token: forged }))).toBe(
        'Unauthenticated',
      );
      const noBoard = await rpc(node.url, 'node.stats', {}, { token: admin });
      expect([noBoard.status, tag(noBoard)]).toEqual([401, 'MissingBoardEnvelope']);
      const readOnly = await mintToken(TOKEN_SECRET, { boards: ['tasks'], verbs: ['read'], ttlSec: 60 });
      const forbidden = await rpc(
        node.url,
        'mutate.insert',
        { rows: [{ id: 'f' }] },
        { board: 'tasks', token: readOnly },
      );
      expect([forbidden.status, tag(forbidden)]).toEqual([403, 'Forbidden']);
      const otherBoard = await rpc(
        node.url,
        'query.execute',
        { sql: 'select 1', tables: [] },
        { board: 'other', token: readOnly },
      );
      expect([otherBoard.status, tag(otherBoard)]).toEqual([403, 'Forbidden']);
      const unknown = await rpc(node.url, 'query.nope', {}, { board: 'tasks', token: admin });
      expect([unknown.status, tag(unknown)]).toEqual([404, 'UnknownProcedure']);
      const badJson = await rpc(node.url, 'mutate.insert', undefined, {
        board: 'tasks',
        token: admin,
        raw: '{"rows": [',
      });
      expect([badJson.status, tag(badJson)]).toEqual([400, 'InvalidInput']);
      const badShape = await rpc(
        node.url,
        'mutate.insert',
        { rows: 'nope' },
        { board: 'tasks', token: admin },
      );
      expect([badShape.status, tag(badShape)]).toEqual([400, 'InvalidInput']);
      const badId = await rpc(node.url, 'node.stats', {}, { board: 'bad-id!', token: admin });
      expect([badId.status, tag(badId)]).toEqual([400, 'InvalidBoardId']);
      expect(badId.headers.get('content-type')).toContain('application/json');
      const tooLong = await rpc(node.url, 'node.stats', {}, { board: 'a'.repeat(65), token: admin });
      expect(tag(tooLong)).toBe('InvalidBoardId');
    });

    it('takes the board from a pinning token and refuses a header naming another board', async () => {
      const pinned = await mintToken(TOKEN_SECRET, {
        boards: ['tasks'],
        verbs: ['read'],
        ttlSec: 60,
        pin: true,
      });
      const stats = value<{ nodeId: string; boards: string[]; store: string }>(
        await rpc(node.url, 'node.stats', {}, { token: pinned }),
      );
      expect(stats.boards).toEqual(expect.arrayContaining(['tasks', 'other']));
      expect(stats.store).toBe(storeName === 'embedded' ? 'embedded' : 'postgres');
      const elsewhere = await rpc(node.url, 'node.stats', {}, { token: pinned, board: 'other' });
      expect([elsewhere.status, tag(elsewhere)]).toEqual([403, 'Forbidden']);
    });

    it('mints tokens from the CLI with the designed claims', async () => {
      const out = await cli(
        ['token', 'mint', '--board', 'tasks', '--verbs', 'read,write', '--ttl', '1h', '--pin'],
        env,
      );
      expect(out.code).toBe(0);
      const jwt = out.stdout.trim();
      const claims = decodeJwt(jwt);
      expect(claims.boards).toEqual({ tasks: ['read', 'write'] });
      expect(claims.pin).toBe('tasks');
      expect((claims.exp ?? 0) - Math.floor(Date.now() / 1000)).toBeGreaterThan(3500);
      expect(
        value(await rpc(node.url, 'mutate.insert', { rows: [{ id: 'cli-token' }] }, { token: jwt })),
      ).toEqual({
        watermark: expect.any(Number),
      });
      const noSecret = await cli(['token', 'mint', '--board', 'tasks'], { ...env, BOARD_TOKEN_SECRET: '' });
      expect(noSecret.code).toBe(2);
      expect(noSecret.stderr).toContain('BOARD_TOKEN_SECRET');
    });

    it('writes return gap-free watermarks and reads see them, with types and epoch-micros timestamps', async () => {
      const before = Date.now() * 1000;
      const w1 = value<{ watermark: number }>(
        await insert('tasks', [
          {
            id: 'a',
            title: 'first',
            points: 3,
            score: 1.5,
            done: false,
            due: 1_700_000_000_123_456,
            state: 'open',
          },
          { id: 'b', title: null, points: 9_007_199_254_740_991 },
        ]),
      ).watermark;
      const w2 = value<{ watermark: number }>(
        await rpc(
          node.url,
          'mutate.update',
          {
            updates: [
              { id: 'a', patch: { points: 4, state: 'done' } },
              { id: 'b', patch: { done: true } },
            ],
          },
          { board: 'tasks', token: admin },
        ),
      ).watermark;
      expect(w2).toBe(w1 + 1);
      const out = value<Outcome>(
        await q('tasks', 'SELECT * FROM {{t}} WHERE id IN ($1, $2) ORDER BY id', {
          params: ['a', 'b'],
          minWatermark: w2,
        }),
      );
      expect(out.watermark).toBe(w2);
      expect(out.result.columns).toEqual([
        'id',
        'updated_at',
        'state',
        'title',
        'points',
        'score',
        'done',
        'due',
      ]);
      const [a, b] = out.result.rows;
      expect(a?.slice(2)).toEqual(['done', 'first', 4, 1.5, false, 1_700_000_000_123_456]);
      expect(b?.slice(2)).toEqual([null, null, 9_007_199_254_740_991, null, true, null]);
      const updatedAt = a?.[1] as number;
      expect(Number.isInteger(updatedAt)).toBe(true);
      expect(updatedAt).toBeGreaterThanOrEqual(before - 5_000_000);
      expect(updatedAt).toBeLessThanOrEqual(Date.now() * 1000 + 5_000_000);
      expect(typeof out.syncMs).toBe('number');
      expect(typeof out.queryMs).toBe('number');
      expect(['hit', 'reattach', 'rebuild']).toContain(out.cache);
      const again = value<Outcome>(await q('tasks', 'SELECT count(*) AS n FROM {{t}}'));
      expect(again.cache).toBe('hit');
      expect(again.sync.mode).toBe('none');
      const w3 = value<{ watermark: number }>(
        await rpc(node.url, 'mutate.delete', { ids: ['b', 'never'] }, { board: 'tasks', token: admin }),
      ).watermark;
      expect(w3).toBe(w2 + 1);
      const after = value<Outcome>(await q('tasks', 'SELECT id FROM {{t}} WHERE id = $1', { params: ['b'] }));
      expect(after.result.rows).toEqual([]);
      expect(after.cache).toBe('hit');
      expect(after.sync).toEqual({ mode: 'incremental', from: w2, to: w3, applied: 1 });
    });

    it('refuses a floor the source of truth has not reached, instead of answering stale', async () => {
      const head = value<Outcome>(await q('tasks', 'SELECT 1')).watermark;
      const res = await q('tasks', 'SELECT 1', { minWatermark: head + 1000 });
      expect(res.status).toBe(200);
      expect(tag(res)).toBe('WatermarkNotReached');
    });

    it('names unknown boards, unknown columns, wrong cell types, duplicates and missing rows', async () => {
      const cases: [Promise<unknown>, string][] = [
        [insert('nosuchboard', [{ id: 'x' }]), 'UnknownBoard'],
        [q('nosuchboard', 'select 1'), 'UnknownBoard'],
        [rpc(node.url, 'changes.read', { after: 0 }, { board: 'nosuchboard', token: admin }), 'UnknownBoard'],
        [insert('tasks', [{ id: 'c', colour: 'red' }]), 'UnknownColumn'],
        [insert('tasks', [{ id: 'c', points: 'three' }]), 'InvalidCell'],
        [insert('tasks', [{ id: 'c', points: 1.5 }]), 'InvalidCell'],
        [insert('tasks', [{ id: 'c', done: 1 }]), 'InvalidCell'],
        [insert('tasks', [{ title: 'no id' }]), 'InvalidCell'],
        [insert('tasks', [{ id: 'c', updated_at: 5 }]), 'ReadOnlyColumn'],
        [insert('tasks', [{ id: 'a' }]), 'DuplicateRow'],
        [insert('tasks', [{ id: 'd' }, { id: 'd' }]), 'DuplicateRow'],
        [
          rpc(
            node.url,
            'mutate.update',
            { updates: [{ id: 'zzz', patch: { title: 'x' } }] },
            { board: 'tasks', token: admin },
          ),
          'RowNotFound',
        ],
        [
          rpc(
            node.url,
            'mutate.update',
            { updates: [{ id: 'a', patch: { id: 'b' } }] },
            { board: 'tasks', token: admin },
          ),
          'ReadOnlyColumn',
        ],
        [q('tasks', 'SELECT * FROM {{t}}', { tables: [{ token: 't', entity: 'users' }] }), 'UnknownEntity'],
        [q('tasks', 'SELECT * FROM {{u}}'), 'UnknownPlaceholder'],
        [q('tasks', 'SELECT $1'), 'InvalidInput'],
        [q('tasks', 'SELEC nonsense'), 'QueryFailed'],
      ];
      for (const c of cases) {
        const [p, expected] = c;
        const a = (await p) as Awaited<ReturnType<typeof rpc>>;
        expect({ i: cases.indexOf(c), status: a.status, tag: tag(a) }).toEqual({
          i: cases.indexOf(c),
          status: 200,
          tag: expected,
        });
        expect(a.body.status === 'error' && a.body.error.message.length > 0).toBe(true);
      }
    });

    it('applies a multi-row update atomically: one bad patch applies nothing', async () => {
      const w = value<{ watermark: number }>(
        await insert('tasks', [
          { id: 'u1', points: 1 },
          { id: 'u2', points: 2 },
        ]),
      ).watermark;
      const bad = await rpc(
        node.url,
        'mutate.update',
        {
          updates: [
            { id: 'u1', patch: { points: 100 } },
            { id: 'missing', patch: { points: 100 } },
          ],
        },
        { board: 'tasks', token: admin },
      );
      expect(tag(bad)).toBe('RowNotFound');
      const out = value<Outcome>(await q('tasks', "SELECT points FROM {{t}} WHERE id = 'u1'"));
      expect(out.result.rows).toEqual([[1]]);
      expect(out.watermark).toBe(w);
    });

    it('makes keyed mutations exactly-once, for later and concurrent repeats', async () => {
      const body = { rows: [{ id: 'k1', title: 'once' }], idempotencyKey: 'key-1' };
      const first = value<{ watermark: number }>(
        await rpc(node.url, 'mutate.insert', body, { board: 'tasks', token: admin }),
      );
      const repeat = value<{ watermark: number }>(
        await rpc(node.url, 'mutate.insert', body, { board: 'tasks', token: admin }),
      );
      expect(repeat).toEqual(first);
      const concurrent = await Promise.all(
        Array.from({ length: 20 }, () =>
          rpc(
            node.url,
            'mutate.insert',
            { rows: [{ id: 'k2' }], idempotencyKey: 'key-2' },
            { board: 'tasks', token: admin },
          ),
        ),
      );
      const marks = new Set(concurrent.map((a) => value<{ watermark: number }>(a).watermark));
      expect(marks.size).toBe(1);
      const page = value<{ records: { seq: number; payload: { rows?: { id: string }[] } }[] }>(
        await rpc(
          node.url,
          'changes.read',
          { after: first.watermark - 1, limit: 1000 },
          { board: 'tasks', token: admin },
        ),
      );
      const k2Writes = page.records.filter((r) => r.payload.rows?.some((row) => row.id === 'k2'));
      expect(k2Writes).toHaveLength(1);
      expect(k2Writes[0]?.seq).toBe([...marks][0]);
      const n = value<Outcome>(await q('tasks', "SELECT count(*) FROM {{t}} WHERE id IN ('k1', 'k2')"));
      expect(n.result.rows).toEqual([[2]]);
    });

    it('pages changes.read with a cursor and rejects a cursor ahead of head', async () => {
      const head = value<Outcome>(await q('tasks', 'SELECT 1')).watermark;
      const seen: number[] = [];
      let after = 0;
      for (;;) {
        const page = value<{
          resync: boolean;
          records: { seq: number; kind: string }[];
          cursor: number;
          more: boolean;
          head: number;
        }>(await rpc(node.url, 'changes.read', { after, limit: 2 }, { board: 'tasks', token: admin }));
        expect(page.resync).toBe(false);
        expect(page.records.length).toBeLessThanOrEqual(2);
        seen.push(...page.records.map((r) => r.seq));
        after = page.cursor;
        if (!page.more) break;
      }
      expect(seen).toEqual(Array.from({ length: head }, (_, i) => i + 1));
      const ahead = await rpc(
        node.url,
        'changes.read',
        { after: head + 5 },
        { board: 'tasks', token: admin },
      );
      expect(tag(ahead)).toBe('CursorAhead');
    });

    it('streams changes over /watch: replay after a watermark, local writes pushed, heartbeat comments', async () => {
      const start = value<Outcome>(await q('tasks', 'SELECT 1')).watermark;
      let wrote = 0;
      const got = watch(node.url, {
        board: 'tasks',
        token: admin,
        after: start - 1,
        timeoutMs: 10_000,
        onItem: (item) => {
          if ('event' in item && item.event === 'change' && wrote === 0) {
            wrote = 1;
            void insert('tasks', [{ id: 'w1', title: 'watched' }]);
          }
        },
        until: (items) => events(items).length >= 2 && items.some((i) => 'comment' in i),
      });
      const res = await got;
      expect(res.status).toBe(200);
      expect(res.contentType).toContain('text/event-stream');
      const ev = events(res.items);
      expect(ev[0]).toMatchObject({ event: 'change', data: { seq: start }, id: String(start) });
      expect(ev[1]).toMatchObject({
        event: 'change',
        data: { seq: start + 1, kind: 'insert', payload: { rows: [{ id: 'w1' }] } },
      });
      expect(res.items.find((i) => 'comment' in i)).toEqual({ comment: 'hb' });
      const noAuth = await watch(node.url, { board: 'tasks' });
      expect(noAuth.status).toBe(401);
      const writeOnly = await mintToken(TOKEN_SECRET, { boards: ['tasks'], verbs: ['write'], ttlSec: 60 });
      expect((await watch(node.url, { board: 'tasks', token: writeOnly })).status).toBe(403);
    });

    it('sends an error event for a cursor ahead of head, and ends a stream when its token expires', async () => {
      const ahead = await watch(node.url, {
        board: 'tasks',
        token: admin,
        after: 10_000_000,
        timeoutMs: 5000,
      });
      expect(events(ahead.items)).toEqual([
        { event: 'error', data: { _tag: 'CursorAhead', message: expect.any(String) } },
      ]);
      expect(ahead.ended).toBe(true);
      const short = await mintToken(TOKEN_SECRET, { boards: ['tasks'], verbs: ['read'], ttlSec: 2 });
      // `ended` is true only when the server closed the stream (the client gives up after 15 s
      // with `ended` false): the token's expiry closed it.
      const res = await watch(node.url, { board: 'tasks', token: short, timeoutMs: 15_000 });
      expect(res.status).toBe(200);
      expect(res.ended).toBe(true);
    });

    it('ends the connection with a stream it ends, so no client sends a later request on it', async () => {
      // A keep-alive HTTP/1.1 connection: the node ends the stream (cursor ahead of head), then a
      // second request goes on the same connection as soon as the stream's last chunk arrived.
      const { hostname, port } = new URL(node.url);
      const socket = connect(Number(port), hostname);
      let text = '';
      let followed = false;
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.on('error', () => undefined);
      socket.on('data', (c: Buffer) => {
        text += c.toString('utf8');
        if (!followed && text.includes('\r\n0\r\n\r\n')) {
          followed = true;
          socket.write(`GET /health HTTP/1.1\r\nhost: ${hostname}\r\n\r\n`);
        }
      });
      socket.write(
        `GET /watch?after=10000000 HTTP/1.1\r\nhost: ${hostname}\r\nx-data-board: tasks\r\nauthorization: Bearer ${admin}\r\n\r\n`,
      );
      await closed;
      expect(followed).toBe(true);
      expect(text.toLowerCase()).toContain('transfer-encoding: chunked');
      expect(text).toContain('CursorAhead');
      // One answer only: the connection ended with the stream, the /health request got none.
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200']);
    });

    it('keeps the stream of a long-lived token open: a 30-day token still gets heartbeats and changes', async () => {
      // 30 days is past what one Node timer can wait (2^31-1 ms, about 24.8 days): an unclamped
      // expiry timer fires at once and ends the stream before anything is delivered.
      const long = await mintToken(TOKEN_SECRET, {
        boards: ['tasks'],
        verbs: ['read'],
        ttlSec: 30 * 24 * 3600,
      });
      let wrote = false;
      const res = await watch(node.url, {
        board: 'tasks',
        token: long,
        timeoutMs: 15_000,
        until: (items) => {
          if (!wrote && items.some((i) => 'comment' in i)) {
            wrote = true;
            void insert('tasks', [{ id: 'long-lived-watch' }]);
          }
          return events(items).some((e) => e.event === 'change');
        },
      });
      expect(res.status).toBe(200);
      expect(res.ended).toBe(false);
      expect(res.items.find((i) => 'comment' in i)).toEqual({ comment: 'hb' });
      expect(events(res.items)).toEqual([
        expect.objectContaining({ event: 'change', data: expect.objectContaining({ kind: 'insert' }) }),
      ]);
      expect(events(res.items)[0]).toMatchObject({
        data: { payload: { rows: [{ id: 'long-lived-watch' }] } },
      });
    });

    it('answers requests the HTTP parser refuses with InvalidInput in the envelope', async () => {
      for (const answer of Object.values(await malformedAnswers(Number(new URL(node.url).port)))) {
        expect(answer).toMatchObject({ status: 400, contentType: 'application/json', body: INVALID_INPUT });
      }
    });

    it('takes the watch board from a pinning token, and releases a closed stream', async () => {
      const pinned = await mintToken(TOKEN_SECRET, {
        boards: ['other'],
        verbs: ['read'],
        ttlSec: 60,
        pin: true,
      });
      let wrote = false;
      const res = await watch(node.url, {
        token: pinned,
        timeoutMs: 10_000,
        until: (items) => {
          if (!wrote) {
            wrote = true;
            void insert('other', [{ id: 'pinned-watch' }]);
          }
          return events(items).some((e) => e.event === 'change');
        },
      });
      expect(res.status).toBe(200);
      expect(events(res.items)[0]).toMatchObject({
        event: 'change',
        data: { payload: { rows: [{ id: 'pinned-watch' }] } },
      });
      // The client went away: the node drops the stream's subscription.
      let watchers = -1;
      for (let i = 0; i < 50 && watchers !== 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        watchers = value<{ watchers: number }>(
          await rpc(node.url, 'node.stats', {}, { board: 'tasks', token: admin }),
        ).watchers;
      }
      expect(watchers).toBe(0);
    });

    it('evicts least recently used replicas and re-attaches them from their files', async () => {
      await insert('evict1', [{ id: 'e1', title: 'one' }]);
      await insert('evict2', [{ id: 'e2', title: 'two' }]);
      value(await q('evict1', 'SELECT * FROM {{t}}'));
      value(await q('evict2', 'SELECT * FROM {{t}}'));
      value(await q('tasks', 'SELECT 1'));
      // max open is 2: evict1 was the least recently used and has been closed
      const stats = value<{ replicas: { open: number; replicas: { board: string }[]; evicted: number } }>(
        await rpc(node.url, 'node.stats', {}, { board: 'tasks', token: admin }),
      );
      expect(stats.replicas.open).toBe(2);
      expect(stats.replicas.replicas.map((r) => r.board)).not.toContain('evict1');
      await insert('evict1', [{ id: 'e3', title: 'three' }]);
      const back = value<Outcome>(await q('evict1', 'SELECT id FROM {{t}} ORDER BY id'));
      expect(back.cache).toBe('reattach');
      expect(back.sync.mode).toBe('incremental');
      expect(back.result.rows).toEqual([['e1'], ['e3']]);
    });

    it('exposes the operator commands as a library call, served by the running node', async () => {
      const s = await openStore({
        databaseUrl: env.DATABASE_URL,
        dataDir,
        log: createLogger('silent'),
        poolSize: 1,
      });
      try {
        const admin = boardAdmin(s);
        const made = await admin.create('lib_made', [{ name: 'qty', type: 'INTEGER' }]);
        expect(made).toEqual({ id: 'lib_made', columns: [{ name: 'qty', type: 'INTEGER' }], head: 0 });
        await expect(admin.create('bad-id', [])).rejects.toMatchObject({ _tag: 'InvalidBoardId' });
        expect((await admin.list()).map((b) => b.id)).toContain('lib_made');
      } finally {
        await s.close();
      }
      value(await insert('lib_made', [{ id: 'l1', qty: 5 }]));
      const out = value<Outcome>(await q('lib_made', 'SELECT qty FROM {{t}}'));
      expect(out.result.rows).toEqual([[5]]);
    });

    it('carries operator-added columns to the replica through the change log', async () => {
      await insert('schema', [{ id: 's1', title: 'before' }]);
      value(await q('schema', 'SELECT * FROM {{t}}'));
      const added = await cli(['board', 'add-column', 'schema', 'rank:INTEGER'], env);
      expect(added.code).toBe(0);
      expect((await cli(['board', 'add-column', 'schema', 'rank:INTEGER'], env)).stderr).toContain(
        'ColumnExists',
      );
      await insert('schema', [{ id: 's2', title: 'after', rank: 7 }]);
      const out = value<Outcome>(await q('schema', 'SELECT id, rank FROM {{t}} ORDER BY id'));
      expect(out.cache).toBe('hit');
      expect(out.result.rows).toEqual([
        ['s1', null],
        ['s2', 7],
      ]);
      const recs = value<{ records: { kind: string }[] }>(
        await rpc(node.url, 'changes.read', { after: 0 }, { board: 'schema', token: admin }),
      );
      expect(recs.records.map((r) => r.kind)).toEqual(['insert', 'schema', 'insert']);
      const dropped = await cli(['board', 'drop', 'schema'], env);
      expect(dropped.code).toBe(0);
      expect(tag(await q('schema', 'SELECT 1'))).toBe('UnknownBoard');
    });
  });
}
