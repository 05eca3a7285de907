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
    ['other board by its Postgres table name', 'SELECT * FROM board_2', 'QueryRefused'],
    ['other board by its id', 'SELECT * FROM secret', 'QueryRefused'],
    ['other board as a schema', 'SELECT * FROM secret.items', 'QueryRefused'],
    ['other board through query_table', "SELECT * FROM query_table('secret')", 'QueryRefused'],
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
    ['a file path as a table', "SELECT * FROM '/etc/passwd'", 'QueryRefused'],
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
    ['a write hidden in query()', "SELECT * FROM query('DELETE FROM items')", 'QueryRefused'],
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
    // the host: the replica's file path and the node's directories (catalogs, settings, SQL from text)
    ['duckdb_databases()', 'SELECT * FROM duckdb_databases()', 'QueryRefused'],
    ['the duckdb_databases view', 'SELECT path FROM duckdb_databases', 'QueryRefused'],
    ['current_setting of temp_directory', "SELECT current_setting('temp_directory')", 'QueryRefused'],
    ['current_setting qualified', "SELECT pg_catalog.current_setting('home_directory')", 'QueryRefused'],
    ['a setting through a cast error', "SELECT current_setting('temp_directory')::INTEGER", 'QueryRefused'],
    [
      'duckdb_settings()',
      "SELECT value FROM duckdb_settings() WHERE name = 'temp_directory'",
      'QueryRefused',
    ],
    ['pg_settings', 'SELECT * FROM pg_catalog.pg_settings', 'QueryRefused'],
    [
      'a setting through query()',
      "SELECT * FROM query('SELECT current_setting(''temp_directory'')')",
      'QueryRefused',
    ],
    ['a catalog through query_table()', "SELECT * FROM query_table('duckdb_settings')", 'QueryRefused'],
    [
      'serialized SQL executed',
      "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
      'QueryRefused',
    ],
    ['pragma_database_list', 'SELECT * FROM pragma_database_list', 'QueryRefused'],
    ['sqlite_master', 'SELECT * FROM sqlite_master', 'QueryRefused'],
    ['duckdb_temporary_files()', 'SELECT * FROM duckdb_temporary_files()', 'QueryRefused'],
    ['duckdb_extensions()', 'SELECT install_path FROM duckdb_extensions()', 'QueryRefused'],
    ['a catalog macro', 'SELECT pg_get_viewdef(1)', 'QueryRefused'],
    [
      'a catalog in a subquery',
      'SELECT (SELECT max(path) FROM duckdb_databases()) FROM {{t}}',
      'QueryRefused',
    ],
    [
      'a catalog inside a table function argument',
      'SELECT * FROM range((SELECT count(*) FROM duckdb_databases))',
      'QueryRefused',
    ],
    ['a CTE reading a catalog', 'WITH d AS (SELECT * FROM duckdb_databases) SELECT * FROM d', 'QueryRefused'],
    [
      'a CTE naming itself, not recursive',
      'WITH duckdb_databases AS (SELECT * FROM duckdb_databases) SELECT * FROM duckdb_databases',
      'QueryRefused',
    ],
    [
      'a CTE name used outside its scope',
      'SELECT * FROM (WITH duckdb_databases AS (SELECT 1) SELECT * FROM duckdb_databases), duckdb_databases',
      'QueryRefused',
    ],
    ['checkpoint()', 'SELECT * FROM checkpoint()', 'QueryRefused'],
    // SHOW, DESCRIBE and SUMMARIZE as FROM items (catalog reads the statement check does not see)
    ['SHOW TABLES as a subquery', 'SELECT * FROM (SHOW TABLES)', 'QueryRefused'],
    ['SHOW ALL TABLES as a subquery', 'SELECT * FROM (SHOW ALL TABLES)', 'QueryRefused'],
    ['SHOW DATABASES as a subquery', 'SELECT * FROM (SHOW DATABASES)', 'QueryRefused'],
    ['DESCRIBE as a subquery', 'SELECT * FROM (DESCRIBE items)', 'QueryRefused'],
    ['DESCRIBE in a CTE', 'WITH d AS (FROM (DESCRIBE {{t}})) SELECT * FROM d', 'QueryRefused'],
    ['SUMMARIZE as a subquery', 'SELECT * FROM (SUMMARIZE {{t}})', 'QueryRefused'],
    ['SHOW in a scalar subquery', 'SELECT (SELECT count(*) FROM (SHOW TABLES))', 'QueryRefused'],
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
      // The node's directories never show, unless the attempt itself named them.
      if (!sql.includes(dir)) expect(a.text, label).not.toContain(dir);
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

  it('still answers reads over values, recursive CTEs and CTEs named like catalog views', async () => {
    const read = async (sql: string) =>
      value<{ result: { rows: unknown[][] } }>(
        await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'mine' }),
      ).result.rows;
    expect(
      await read(
        'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r',
      ),
    ).toEqual([[1], [2], [3]]);
    expect(await read('WITH duckdb_settings AS (SELECT 7 AS x) SELECT x FROM duckdb_settings')).toEqual([
      [7],
    ]);
    expect(
      await read('SELECT a.id, x FROM {{t}} a JOIN main.items b USING (id), range(2) r(x) ORDER BY x'),
    ).toEqual([
      ['m1', 0],
      ['m1', 1],
    ]);
    expect(await read('SELECT unnest([1, 2]) AS v')).toEqual([[1], [2]]);
    expect(await read('FROM generate_series(1, 2) SELECT *')).toEqual([[1], [2]]);
    expect(await read('SELECT * FROM (VALUES (1), (2)) v(x) ORDER BY x')).toEqual([[1], [2]]);
    expect(
      await read('SELECT * FROM (UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v) ORDER BY k'),
    ).toEqual([
      ['a', 1],
      ['b', 2],
    ]);
  });

  it("never lists the replica's own tables through SHOW or DESCRIBE", async () => {
    for (const sql of [
      'SELECT * FROM (SHOW TABLES)',
      'SELECT * FROM (SHOW ALL TABLES)',
      'FROM (DESCRIBE items)',
    ]) {
      const a = await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'mine' });
      expect([a.status, tag(a)], sql).toEqual([200, 'QueryRefused']);
      expect(a.text, sql).not.toContain('replica_meta');
      expect(a.text, sql).toContain('SHOW, DESCRIBE and SUMMARIZE are not allowed');
    }
  });

  it('refuses a text without a statement precisely', async () => {
    for (const sql of ['   ', '-- hi', ';', '/* x */ ;\n;']) {
      const a = await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'mine' });
      expect([a.status, tag(a)], JSON.stringify(sql)).toEqual([200, 'QueryRefused']);
      expect(a.body.status === 'error' && a.body.error.message).toBe(
        'exactly one statement is allowed, got 0',
      );
    }
  });

  it('checks and answers queries with constants beyond DOUBLE (Infinity in the parse tree)', async () => {
    const read = async (sql: string) =>
      value<{ result: { rows: unknown[][] } }>(
        await rpc(node.url, 'query.execute', { sql, tables: T }, { board: 'mine' }),
      ).result.rows;
    expect(await read('SELECT 1e400, -1e400')).toEqual([['Infinity', '-Infinity']]);
    expect(await read('SELECT \'Infinity\' AS s, 1e400 > 1 AS b, "NaN" FROM (SELECT 1 AS "NaN")')).toEqual([
      ['Infinity', true, 1],
    ]);
    // The source check still runs on such a query.
    const a = await rpc(
      node.url,
      'query.execute',
      { sql: 'SELECT 1e400, * FROM duckdb_databases()', tables: T },
      { board: 'mine' },
    );
    expect(tag(a)).toBe('QueryRefused');
  });

  it('binds every valid cell as a parameter: integers past 64 bits as DOUBLE', async () => {
    const read = async (sql: string, params: unknown[]) =>
      value<{ result: { rows: unknown[][] } }>(
        await rpc(node.url, 'query.execute', { sql, tables: T, params }, { board: 'mine' }),
      ).result.rows;
    expect(await read('SELECT $1::DOUBLE', [1e20])).toEqual([[1e20]]);
    expect(await read('SELECT $1, $2, $3', [1e300, -1e20, 2 ** 53 + 2])).toEqual([
      [1e300, -1e20, 2 ** 53 + 2],
    ]);
    expect(await read('SELECT $1 + 1, $2, $3', [2 ** 53 - 1, -(2 ** 31), 0.5])).toEqual([
      ['9007199254740992', -(2 ** 31), 0.5],
    ]);
    expect(await read('SELECT id FROM {{t}} WHERE length(title) < $1', [1e20])).toEqual([['m1']]);
  });

  it("reads intervals back in DuckDB's own text form", async () => {
    const rows = value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        {
          sql: "SELECT INTERVAL 1 DAY, INTERVAL 2 MONTH, INTERVAL 3 SECOND, INTERVAL '1 year 2 months 3 days 04:05:06.789', -INTERVAL 90 MINUTE",
          tables: T,
        },
        { board: 'mine' },
      ),
    ).result.rows;
    expect(rows).toEqual([
      ['1 day', '2 months', '00:00:03', '1 year 2 months 3 days 04:05:06.789', '-01:30:00'],
    ]);
  });

  it('answers QueryTimeout at the deadline of a call DuckDB does not interrupt, and keeps serving', async () => {
    // One function call building a 300 MB string: DuckDB returns from it only when it is built.
    const heavy = await rpc(
      node.url,
      'query.execute',
      { sql: "SELECT length(repeat('x', 300000000))", tables: T },
      { board: 'mine' },
    );
    expect([heavy.status, tag(heavy)]).toEqual([200, 'QueryTimeout']);
    const health = await fetch(`${node.url}/health`);
    expect(health.status).toBe(200);
    const after = value<{ result: { rows: unknown[][] } }>(
      await rpc(node.url, 'query.execute', { sql: 'SELECT id FROM {{t}}', tables: T }, { board: 'mine' }),
    );
    expect(after.result.rows).toEqual([['m1']]);
    expect(node.proc.exitCode).toBe(null);
  });
});

describe('result bounds: a heavy read answers ResultTooLarge and stalls nobody', () => {
  let node: NodeProcess;

  boardTest.beforeAll(async ({ tempDir, startNode }) => {
    const env = { BOARD_DATA_DIR: await tempDir('board-bounds-') };
    expect((await cli(['board', 'create', 'heavy'], env)).code).toBe(0);
    expect((await cli(['board', 'create', 'light', '--column', 'title:TEXT'], env)).code).toBe(0);
    // The default bounds: 100000 rows, 32 MiB.
    node = await startNode(env);
    value(await rpc(node.url, 'mutate.insert', { rows: [{ id: 'l1', title: 'light' }] }, { board: 'light' }));
    // Both replicas built up front, so the test below measures reads, not rebuilds.
    for (const board of ['heavy', 'light']) value(await query(board, 'SELECT count(*) FROM {{t}}'));
  });

  const query = (board: string, sql: string) => rpc(node.url, 'query.execute', { sql, tables: T }, { board });

  it('stops at the row bound and at the byte bound with ResultTooLarge', async () => {
    const atBound = value<{ result: { rows: unknown[][] } }>(
      await query('heavy', 'SELECT 1 FROM range(100000)'),
    );
    expect(atBound.result.rows.length).toBe(100000);
    const rows = await query('heavy', 'SELECT 1 FROM range(100001)');
    expect([rows.status, tag(rows)]).toEqual([200, 'ResultTooLarge']);
    expect(rows.text).toContain('larger than 100000 rows');
    const bytes = await query('heavy', "SELECT repeat('x', 400) FROM range(90000)");
    expect([bytes.status, tag(bytes)]).toEqual([200, 'ResultTooLarge']);
    expect(bytes.text).toContain(`larger than ${32 * 1024 * 1024} bytes`);
    // The abandoned results leave the replica and its cached statements usable.
    expect(tag(await query('heavy', 'SELECT 1 FROM range(100001)'))).toBe('ResultTooLarge');
    expect(
      value<{ result: { rows: unknown[][] } }>(await query('heavy', 'SELECT 1 FROM range(100000)')).result
        .rows.length,
    ).toBe(100000);
  });

  it('answers /health and other boards while the heavy query runs, then the heavy board again', async () => {
    // The query of issue 13 that blocked the event loop for a minute and crashed the node.
    let finished = false;
    const heavy = query('heavy', 'SELECT x,x,x,x,x,x,x,x,x,x FROM range(15000000) t(x)').then((a) => {
      finished = true;
      return a;
    });
    const during = { health: 0, light: 0 };
    const health = (async () => {
      while (!finished) {
        const res = await fetch(`${node.url}/health`);
        expect(res.status).toBe(200);
        await res.text();
        if (!finished) during.health++;
      }
    })();
    const light = (async () => {
      while (!finished) {
        const a = await query('light', 'SELECT title FROM {{t}}');
        expect(value<{ result: { rows: unknown[][] } }>(a).result.rows).toEqual([['light']]);
        if (!finished) during.light++;
      }
    })();
    const answer = await heavy;
    await Promise.all([health, light]);
    expect([answer.status, tag(answer)]).toEqual([200, 'ResultTooLarge']);
    expect(during.health).toBeGreaterThan(0);
    expect(during.light).toBeGreaterThan(0);
    expect(node.proc.exitCode).toBe(null);
    const after = value<{ result: { rows: unknown[][] } }>(
      await query('heavy', 'SELECT count(*) FROM {{t}}'),
    );
    expect(after.result.rows).toEqual([[0]]);
  });
});
