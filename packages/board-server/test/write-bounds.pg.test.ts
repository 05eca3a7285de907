/**
 * What one writer can do to a board: text cells and mutations are bounded (so every acknowledged
 * write fits in a replica's memory); a board far larger than a replica's DuckDB memory limit is
 * still synced, queried and rebuilt; a replica DuckDB gives up on (text written before the bound)
 * answers a precise error, never `Internal`, and is rebuilt from PostgreSQL once the rows are gone;
 * `changes.read` pages are bounded by bytes; `__proto__` is a column name like any other.
 */
import { rm } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { describeOnServerPostgres, type TestPostgres } from '@support/pg/testing';
import pg from 'pg';
import { expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, rpc, tag, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];

/**
 * POSTs one request on a fresh connection (node:http, no keep-alive pool): a 60 MB body sent with
 * fetch on a pooled connection was seen to fail with EPIPE in this suite (not investigated further).
 */
function postOnce(
  url: string,
  procedure: string,
  board: string,
  body: unknown,
): Promise<{ status: number; text: string }> {
  const payload = JSON.stringify(body);
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port,
        path: `/rpc/${procedure}`,
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          'x-data-board': board,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
const KiB = 1024;
/**
 * The two tests that move 80 MB through PostgreSQL and DuckDB take 11-16 s alone and were seen at
 * 26-45 s in a full test run on this 2-core machine: a hang guard with room, not a speed bound.
 */
const HEAVY_TIMEOUT = 240_000;
const MiB = 1024 * KiB;

describeOnServerPostgres('write bounds and replica memory', () => {
  let env: Record<string, string>;
  let node: NodeProcess;
  let start: (env: Record<string, string>) => Promise<NodeProcess>;
  let postgres: TestPostgres;
  const insert = (board: string, rows: Record<string, unknown>[]) =>
    rpc(node.url, 'mutate.insert', { rows }, { board });
  const query = (board: string, sql: string) => rpc(node.url, 'query.execute', { sql, tables: T }, { board });
  const rowsOf = (a: Parameters<typeof value>[0]) =>
    value<{ result: { rows: unknown[][] }; cache: string }>(a);

  boardTest.beforeAll(async ({ testPostgres, tempDir, startNode }) => {
    postgres = testPostgres;
    start = startNode;
    // The smallest replica memory limit (64 MB: budget 64 MB / 4, at least 64), so that the boards
    // here are larger than their replica's memory.
    env = {
      DATABASE_URL: testPostgres.url(),
      BOARD_DATA_DIR: await tempDir('board-bounds-'),
      BOARD_REPLICA_MEMORY_MB: '64',
    };
    for (const b of ['bounds', 'big', 'legacy', 'paged']) {
      expect((await cli(['board', 'create', b, '--column', 'title:TEXT'], env)).code).toBe(0);
    }
    node = await startNode(env);
  });

  it('refuses a text cell over 64 KiB and a mutation over 8 MiB of text, naming them; stores nothing', async () => {
    const over = await insert('bounds', [{ id: 'a', title: 'x'.repeat(64 * KiB + 1) }]);
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({
      status: 'error',
      error: {
        _tag: 'InvalidInput',
        message: expect.stringContaining('rows.0.title: a text cell holds at most 65536 bytes'),
      },
    });
    // Counted in UTF-8 bytes: 40,000 two-byte characters are 80,000 bytes.
    expect(tag(await insert('bounds', [{ id: 'b', title: '\u00e9'.repeat(40_000) }]))).toBe('InvalidInput');
    const patch = await rpc(
      node.url,
      'mutate.update',
      { updates: [{ id: 'a', patch: { title: 'x'.repeat(64 * KiB + 1) } }] },
      { board: 'bounds' },
    );
    expect(tag(patch)).toBe('InvalidInput');
    const cell = 'x'.repeat(64 * KiB);
    const many = await insert(
      'bounds',
      Array.from({ length: 256 }, (_, i) => ({ id: `m${i}`, title: cell })),
    );
    expect(many.body).toMatchObject({
      error: {
        _tag: 'InvalidInput',
        message: expect.stringContaining('a mutation stores at most 8388608 bytes'),
      },
    });
    // A single cell of 60 MB, as the review sent (on a connection of its own: see postOnce).
    const huge = await postOnce(node.url, 'mutate.insert', 'bounds', {
      rows: [{ id: 'h', title: 'x'.repeat(60 * MiB) }],
    });
    expect(huge.status).toBe(400);
    expect(JSON.parse(huge.text)).toMatchObject({ error: { _tag: 'InvalidInput' } });
    expect(rowsOf(await query('bounds', 'SELECT count(*) FROM {{t}}')).result.rows).toEqual([[0]]);
    value(await insert('bounds', [{ id: 'max', title: cell }]));
    expect(rowsOf(await query('bounds', 'SELECT length(title) FROM {{t}}')).result.rows).toEqual([
      [64 * KiB],
    ]);
  });

  it('treats __proto__ as a column name: UnknownColumn like constructor, never silently dropped', async () => {
    for (const name of ['__proto__', 'constructor']) {
      const raw = `{"rows":[{"id":"u-${name}","${name}":"x"}]}`;
      const a = await rpc(node.url, 'mutate.insert', undefined, { board: 'bounds', raw });
      expect(a.body).toMatchObject({
        status: 'error',
        error: { _tag: 'UnknownColumn', message: expect.stringContaining(`unknown column "${name}"`) },
      });
    }
    const patch = `{"updates":[{"id":"max","patch":{"__proto__":"x"}}]}`;
    expect(tag(await rpc(node.url, 'mutate.update', undefined, { board: 'bounds', raw: patch }))).toBe(
      'UnknownColumn',
    );
    const ids = await query('bounds', "SELECT id FROM {{t}} WHERE id LIKE 'u-%'");
    expect(rowsOf(ids).result.rows).toEqual([]);
  });

  it(
    'keeps a board larger than its replica memory limit readable, synced and rebuilt (80 MB of 64 KiB cells)',
    async () => {
      // Each replica has a 64 MB DuckDB memory limit here; 10 mutations of 8 MiB
      // (127 cells of 64 KiB each, ids included under the bound) are 80 MB.
      const cell = 'y'.repeat(64 * KiB);
      for (let m = 0; m < 10; m++) {
        value(
          await insert(
            'big',
            Array.from({ length: 127 }, (_, i) => ({ id: `b${m}-${i}`, title: cell })),
          ),
        );
        // A read after each write: the replica catches up one 8 MiB record at a time.
        const r = rowsOf(await query('big', 'SELECT count(*) FROM {{t}}'));
        expect(r.result.rows).toEqual([[(m + 1) * 127]]);
        const one = await query('big', `SELECT length(title) FROM {{t}} WHERE id = 'b${m}-7'`);
        expect(rowsOf(one).result.rows).toEqual([[64 * KiB]]);
      }
      // A scan of all 80 MB of text may need more than the replica's 64 MB: then it is the query's
      // own QueryFailed (out of memory), and the replica is unharmed.
      const scan = await query('big', 'SELECT sum(length(title)) FROM {{t}}');
      if (tag(scan) === 'ok') expect(rowsOf(scan).result.rows).toEqual([[10 * 127 * 64 * KiB]]);
      else
        expect(scan.body).toMatchObject({
          error: { _tag: 'QueryFailed', message: expect.stringContaining('Out of Memory') },
        });
      expect(rowsOf(await query('big', 'SELECT count(*) FROM {{t}}')).result.rows).toEqual([[10 * 127]]);
      // Without its file the replica is rebuilt from the base table: in batches, not one transaction.
      await node.stop();
      await rm(join(env.BOARD_DATA_DIR as string, 'replicas'), { recursive: true, force: true });
      node = await start(env);
      const rebuilt = rowsOf(await query('big', 'SELECT count(*) FROM {{t}}'));
      expect(rebuilt.cache).toBe('rebuild');
      expect(rebuilt.result.rows).toEqual([[10 * 127]]);
      const last = await query('big', "SELECT length(title) FROM {{t}} WHERE id = 'b9-126'");
      expect(rowsOf(last).result.rows).toEqual([[64 * KiB]]);
      expect(node.output()).not.toMatch(/FATAL|rebuilding the replica failed|unexpected error/);
    },
    HEAVY_TIMEOUT,
  );

  it(
    'answers a precise error, never Internal, for a replica DuckDB cannot hold, and rebuilds it once the rows are gone',
    async () => {
      // Rows written before the cell bound existed: 4 MiB titles (DuckDB cannot spill strings longer
      // than its 256 KiB block), 20 of them, straight into the store as a node would have written them.
      const client = new pg.Client({ connectionString: postgres.url() });
      await client.connect();
      try {
        value(await insert('legacy', [{ id: 'small', title: 'fine' }]));
        expect(rowsOf(await query('legacy', 'SELECT count(*) FROM {{t}}')).result.rows).toEqual([[1]]);
        const { rows } = await client.query<{ board_no: string }>(
          "SELECT board_no FROM board_boards WHERE board_id = 'legacy'",
        );
        const table = `board_${rows[0]?.board_no}`;
        for (let i = 0; i < 20; i++) {
          await client.query('BEGIN');
          const h = await client.query<{ head: string }>(
            "UPDATE board_boards SET head = head + 1 WHERE board_id = 'legacy' RETURNING head",
          );
          const seq = Number(h.rows[0]?.head);
          await client.query(
            `INSERT INTO ${table} (id, title, updated_at) VALUES ($1, repeat('z', 4194304), now())`,
            [`legacy-${i}`],
          );
          await client.query(
            `INSERT INTO board_changes (board_id, seq, kind, payload) VALUES ('legacy', $1, 'insert',
             jsonb_build_object('updatedAt', (extract(epoch FROM now()) * 1000000)::bigint,
               'rows', jsonb_build_array(jsonb_build_object('id', $2::text, 'title', repeat('z', 4194304)))))`,
            [seq, `legacy-${i}`],
          );
          await client.query('COMMIT');
        }
      } finally {
        await client.end();
      }
      const tags = new Set<string>();
      for (let i = 0; i < 3; i++) {
        const a = await query('legacy', 'SELECT count(*) FROM {{t}}');
        expect(a.status).toBe(200);
        tags.add(tag(a));
        // The node stays responsive.
        expect((await fetch(`${node.url}/health`)).status).toBe(200);
      }
      expect([...tags].every((t) => t === 'OutOfMemory' || t === 'ReplicaUnavailable')).toBe(true);
      // The board did not change, so the failed rebuild is not tried again for every request (each
      // would read all 80 MB from the store): the later requests got its error at once.
      expect(node.output().match(/rebuilding the replica failed/g)).toHaveLength(1);
      // Deleting the rows restores reads: the replica is rebuilt from the store.
      value(
        await rpc(
          node.url,
          'mutate.delete',
          { ids: Array.from({ length: 20 }, (_, i) => `legacy-${i}`) },
          { board: 'legacy' },
        ),
      );
      const after = rowsOf(await query('legacy', 'SELECT count(*) FROM {{t}}'));
      expect(after.result.rows).toEqual([[1]]);
      expect(after.cache).toBe('rebuild');
      expect(node.output()).not.toMatch(/"tag":"Internal"|unexpected error/);
    },
    HEAVY_TIMEOUT,
  );

  it('bounds a changes.read page by bytes: at least one record, never much past 4 MiB', async () => {
    const cell = 'p'.repeat(64 * KiB);
    const rows = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, title: cell }));
    const start = value<{ watermark: number }>(
      await insert('paged', [{ id: 'p0', title: 'small' }]),
    ).watermark;
    for (let m = 1; m <= 3; m++) value(await insert('paged', rows(`p${m}-`, 48))); // 3 MiB each
    const last = value<{ watermark: number }>(await insert('paged', rows('q', 127))).watermark; // 8 MiB
    type Page = { resync: false; records: { seq: number }[]; cursor: number; more: boolean };
    const pages: number[][] = [];
    let after = start - 1;
    for (;;) {
      const page = value<Page>(
        await rpc(node.url, 'changes.read', { after, limit: 1000 }, { board: 'paged' }),
      );
      pages.push(page.records.map((r) => r.seq));
      after = page.cursor;
      if (!page.more) break;
    }
    // The small record and the first 3 MiB one fit in 4 MiB; each other 3 MiB one goes alone (a
    // second would pass 4 MiB), and the 8 MiB record comes alone: at least one record per page.
    expect(pages).toEqual([[start, start + 1], [start + 2], [start + 3], [last]]);
    expect(after).toBe(last);
  });
});
