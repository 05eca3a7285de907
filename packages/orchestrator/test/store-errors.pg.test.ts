import { IN_CI, pgTest, TestPostgres } from '@support/pg/testing';
import pg from 'pg';
import { afterAll, expect, test } from 'vitest';
import { toOrchError } from '../src/api/errors.js';

/**
 * The store errors a request's values can cause, produced by a real PostgreSQL, each mapped by
 * orchd's one error mapper to a 4xx with a fixed message: never `internal`, never the database's
 * own text (which quotes values and schema).
 */
const skip = !TestPostgres.available() && !IN_CI;
let client: pg.Client;
pgTest.beforeAll(async ({ testPostgres }) => {
  client = new pg.Client({ connectionString: await testPostgres.createDatabase('store_errors') });
  await client.connect();
  await client.query('create table t (id text primary key, doc jsonb, n int)');
});
afterAll(async () => {
  await client?.end();
});

const refusal = (sql: string, params: unknown[]) =>
  client.query(sql, params).then(
    () => {
      throw new Error(`no error from ${sql}`);
    },
    (err: unknown) => ({ raw: (err as Error).message, mapped: toOrchError(err) }),
  );

test.skipIf(skip)('each class input can cause is a 4xx with a fixed message', async () => {
  const cases: [string, unknown[], number, string][] = [
    ['insert into t (id) values ($1)', ['a\u0000b'], 400, 'invalid_argument'], // 22021 NUL in text
    ['insert into t (id, doc) values ($1, $2)', ['j', '{"a":"\\u0000"}'], 400, 'invalid_argument'], // 22P05
    ['insert into t (id, doc) values ($1, $2)', ['k', '{"a":"\\ud800"}'], 400, 'invalid_argument'], // 22P02
    ['insert into t (id, n) values ($1, $2)', ['n', 2 ** 40], 400, 'invalid_argument'], // 22003
    [
      'insert into t (id) values ($1)',
      [Array.from({ length: 40_000 }, (_, i) => i.toString(36)).join('')],
      400,
      'invalid_argument',
    ], // 54000 index row
    ['insert into t (id) values ($1), ($1)', ['dup'], 409, 'conflict'], // 23505
  ];
  for (const [sql, params, status, code] of cases) {
    const { raw, mapped } = await refusal(sql, params);
    expect(mapped.status, raw).toBe(status);
    expect(mapped.code, raw).toBe(code);
    expect(mapped.message).toMatch(
      /^(a value in the request|the request conflicts).*\(SQLSTATE [0-9A-Z]{5}\)$/,
    );
    expect(mapped.message).not.toContain(raw);
  }
});
