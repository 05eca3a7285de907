/**
 * Escape attempts against the read path: a query sees its own board's table and nothing else.
 * Every attempt must come back as a tagged error, leak nothing, and change nothing.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, rpc, tag, value } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
const SECRET = 'TOPSECRET_5d1c';

describe('query isolation: escape attempts are all refused', () => {
  let node: NodeProcess;
  let dir: string;
  let secretReplica: string;
  const drop = () => join(dir, 'escape-output');

  boardTest.beforeAll(async ({ tempDir, startNode }) => {
    dir = await tempDir('board-iso-');
    const env = { BOARD_DATA_DIR: dir };
    expect((await cli(['board', 'create', 'mine', '--column', 'title:TEXT'], env)).code).toBe(0);
    expect((await cli(['board', 'create', 'secret', '--column', 'title:TEXT'], env)).code).toBe(0);
    node = await startNode({ ...env, BOARD_QUERY_TIMEOUT_MS: '1500' });
    value(await rpc(node.url, 'mutate.insert', { rows: [{ id: 'm1', title: 'mine' }] }, { board: 'mine' }));
    value(await rpc(node.url, 'mutate.insert', { rows: [{ id: 's1', title: SECRET }] }, { board: 'secret' }));
    // Make sure the other board's replica file exists on disk next to ours.
    value(
      await rpc(node.url, 'query.execute', { sql: 'SELECT * FROM {{t}}', tables: T }, { board: 'secret' }),
    );
    value(await rpc(node.url, 'query.execute', { sql: 'SELECT * FROM {{t}}', tables: T }, { board: 'mine' }));
    secretReplica = join(dir, 'replicas', 'secret.2.duckdb');
    expect(existsSync(secretReplica)).toBe(true);
  });

  /** [label, sql, expected tag] */
  const attempts = (): [string, string, string][] => [
    // other boards
    ['other board by its Postgres table name', 'SELECT * FROM board_2', 'QueryFailed'],
    ['other board by its id', 'SELECT * FROM secret', 'QueryFailed'],
    ['other board as a schema', 'SELECT * FROM secret.items', 'QueryFailed'],
    ['other board through query_table', "SELECT * FROM query_table('secret')", 'QueryFailed'],
    ['other board replica attached', `ATTACH '${secretReplica}' AS s`, 'QueryRefused'],
    ['other board replica read as a file', `SELECT * FROM '${secretReplica}'`, 'QueryRefused'],
    ['other board replica through read_blob', `SELECT * FROM read_blob('${secretReplica}')`, 'QueryRefused'],
    // the file system
    ['read_csv of a local file', "SELECT * FROM read_csv('/etc/passwd')", 'QueryRefused'],
    ['read_csv_auto of a local file', "SELECT * FROM read_csv_auto('/etc/passwd')", 'QueryRefused'],
    ['read_parquet of a local file', "SELECT * FROM read_parquet('/etc/passwd')", 'QueryRefused'],
    ['read_json of a local file', "SELECT * FROM read_json('/etc/os-release')", 'QueryRefused'],
    ['read_text of a local file', "SELECT * FROM read_text('/etc/hostname')", 'QueryRefused'],
    ['glob of the file system', "SELECT * FROM glob('/*')", 'QueryRefused'],
    ['a file path as a table', "SELECT * FROM '/etc/passwd'", 'QueryFailed'],
    ['a csv file path as a table', "SELECT * FROM '/etc/hosts.csv'", 'QueryRefused'],
    ['SHOW (rewritten to a SELECT by DuckDB)', 'SHOW databases', 'QueryRefused'],
    ['DESCRIBE (rewritten to a SELECT by DuckDB)', 'DESCRIBE items', 'QueryRefused'],
    ['PRAGMA after a comment', '/* x */ PRAGMA database_list', 'QueryRefused'],
    ['sniff_csv of a local file', "SELECT * FROM sniff_csv('/etc/passwd')", 'QueryRefused'],
    ['parquet_metadata of a local file', "SELECT * FROM parquet_metadata('/etc/passwd')", 'QueryRefused'],
    [
      'a file read inside a subquery',
      "SELECT (SELECT count(*) FROM read_csv('/etc/passwd')) FROM {{t}}",
      'QueryRefused',
    ],
    // the network (loopback only; nothing listens on port 9)
    ['read_csv over http', "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')", 'QueryRefused'],
    ['read_parquet over s3', "SELECT * FROM read_parquet('s3://bucket/x.parquet')", 'QueryRefused'],
    // writes
    ['COPY TO a file', `COPY items TO '${join(dir, 'escape-output')}'`, 'QueryRefused'],
    [
      'COPY of a query TO a file',
      `COPY (SELECT * FROM items) TO '${join(dir, 'escape-output')}' (FORMAT csv)`,
      'QueryRefused',
    ],
    ['EXPORT DATABASE', `EXPORT DATABASE '${join(dir, 'escape-output')}'`, 'QueryRefused'],
    ['INSERT', "INSERT INTO items (id) VALUES ('evil')", 'QueryRefused'],
    ['UPDATE', "UPDATE items SET title = 'evil'", 'QueryRefused'],
    ['DELETE', 'DELETE FROM items', 'QueryRefused'],
    ['DROP TABLE', 'DROP TABLE items', 'QueryRefused'],
    ['ALTER TABLE', 'ALTER TABLE items ADD COLUMN evil INTEGER', 'QueryRefused'],
    ['TRUNCATE', 'TRUNCATE items', 'QueryRefused'],
    ['CREATE TABLE AS', 'CREATE TABLE evil AS SELECT 1', 'QueryRefused'],
    ['CREATE VIEW', 'CREATE VIEW evil AS SELECT 1', 'QueryRefused'],
    ['CREATE MACRO', 'CREATE MACRO evil(x) AS x', 'QueryRefused'],
    ['CREATE SECRET', "CREATE SECRET evil (TYPE s3, KEY_ID 'a', SECRET 'b')", 'QueryRefused'],
    ['a write hidden in query()', "SELECT * FROM query('DELETE FROM items')", 'QueryFailed'],
    ['CHECKPOINT', 'CHECKPOINT', 'QueryRefused'],
    ['VACUUM', 'VACUUM', 'QueryRefused'],
    ['a transaction', 'BEGIN TRANSACTION', 'QueryRefused'],
    // attach and catalogs
    ['ATTACH a new file', `ATTACH '${join(dir, 'escape-output')}' AS evil`, 'QueryRefused'],
    ['ATTACH in memory', "ATTACH ':memory:' AS evil", 'QueryRefused'],
    ['DETACH', 'DETACH memory', 'QueryRefused'],
    ['USE', 'USE memory', 'QueryRefused'],
    // extensions
    ['INSTALL', 'INSTALL httpfs', 'QueryRefused'],
    ['LOAD by name', 'LOAD httpfs', 'QueryRefused'],
    ['LOAD by path', "LOAD '/tmp/evil.duckdb_extension'", 'QueryRefused'],
    ['FORCE INSTALL from a repository', "FORCE INSTALL httpfs FROM 'http://127.0.0.1:9'", 'QueryRefused'],
    // settings
    ['PRAGMA', 'PRAGMA database_list', 'QueryRefused'],
    ['PRAGMA that writes', "PRAGMA enable_profiling='json'", 'QueryRefused'],
    ['SET', 'SET threads = 1', 'QueryRefused'],
    ['SET external access back on', 'SET enable_external_access = true', 'QueryRefused'],
    ['RESET', 'RESET memory_limit', 'QueryRefused'],
    ['CALL', 'CALL pragma_version()', 'QueryRefused'],
    ['EXPLAIN ANALYZE', 'EXPLAIN ANALYZE SELECT 1', 'QueryRefused'],
    // more than one statement
    ['two statements', 'SELECT 1; SELECT 2', 'QueryRefused'],
    ['a write after a read', 'SELECT * FROM {{t}}; DROP TABLE items', 'QueryRefused'],
    [
      'a second statement after a block comment',
      'SELECT 1 /* harmless */; DELETE FROM items',
      'QueryRefused',
    ],
    ['a second statement after a line comment', 'SELECT 1 -- harmless\n; DELETE FROM items', 'QueryRefused'],
    ['a comment hiding a statement boundary', "SELECT '*/' /* ; */; COPY items TO '/tmp/x'", 'QueryRefused'],
    ['a string hiding a statement boundary', "SELECT ';'; SET threads = 1", 'QueryRefused'],
    // resources
    ['a runaway query', 'SELECT count(*) FROM range(100000000000) a, range(10) b', 'QueryTimeout'],
    // placeholders
    ['an unbound placeholder', 'SELECT * FROM {{secret}}', 'UnknownPlaceholder'],
    ['a placeholder that is not a token name', 'SELECT * FROM {{../secret}}', 'UnknownPlaceholder'],
  ];

  it('refuses every attempt with a tag, leaks nothing and changes nothing', async () => {
    const seen: string[] = [];
    const wrong: { label: string; got: string; message: string }[] = [];
    for (const [label, sql, expected] of attempts()) {
      const a = await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'mine' });
      expect(a.status, label).toBe(200);
      if (tag(a) !== expected) {
        wrong.push({
          label,
          got: tag(a),
          message: a.body.status === 'error' ? a.body.error.message.slice(0, 120) : '',
        });
      }
      expect(a.text, label).not.toContain(SECRET);
      expect(a.text, label).not.toContain('root:x:0');
      seen.push(label);
    }
    expect(wrong).toEqual([]);
    expect(seen.length).toBeGreaterThanOrEqual(50);
    expect(existsSync(drop())).toBe(false);
    expect(existsSync(join(dir, 'replicas', 'evil'))).toBe(false);
    const after = value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT id, title FROM {{t}}', tables: T },
        { board: 'mine' },
      ),
    );
    expect(after.result.rows).toEqual([['m1', 'mine']]);
  });

  it('refuses entities other than items and bad token names', async () => {
    const entity = await rpc(
      node.url,
      'query.execute',
      { sql: 'SELECT * FROM {{t}}', tables: [{ token: 't', entity: 'secret' }] },
      { board: 'mine' },
    );
    expect(tag(entity)).toBe('UnknownEntity');
    const token = await rpc(
      node.url,
      'query.execute',
      { sql: 'SELECT 1', tables: [{ token: 't; DROP', entity: 'items' }] },
      { board: 'mine' },
    );
    expect([token.status, tag(token)]).toEqual([400, 'InvalidInput']);
  });

  it('still answers legitimate reads with params after the attempts', async () => {
    const ok = value<{ result: { columns: string[]; rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        {
          sql: 'SELECT title, $1::INTEGER + 1 AS n FROM {{t}} WHERE id = $2 -- a comment',
          tables: T,
          params: [41, 'm1'],
        },
        { board: 'mine' },
      ),
    );
    expect(ok.result).toEqual({ columns: ['title', 'n'], rows: [['mine', 42]] });
  });
});
