// Issue 35 (point 3): where a single-row insert acknowledgement's extra time over a plain INSERT
// goes, in PostgreSQL. The node's unkeyed insert is one statement (packages/board-server
// src/changelog/mutations.ts): advance the board's head, insert the row, append the change record,
// pg_notify. This runs that statement and the same statement with parts left out, side by side
// (interleaved, named prepared statements, one connection, durable commits as in production), on a
// real board's tables, and prints each variant's p50 and its ratio to the plain INSERT:
//   plain    INSERT of the row alone (what bench/plain-endpoint.mjs does)
//   +head    and the head advance (UPDATE board_boards ... RETURNING)
//   +change  and the change record (INSERT INTO board_changes, jsonb payload)
//   +notify  and pg_notify: the node's statement
// Usage: node bench/insert-ack-parts.mjs [runs]   (default 600). Needs the Debian postgresql-15
// server binaries and a build (`npm run build`).
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { boardCli, cleanups, quantile, startPostgres } from './lib/board.mjs';

const RUNS = Number(process.argv[2] ?? 600);
const ms = (x) => `${x.toFixed(3)} ms`;

async function main() {
  const url = await startPostgres({ shared_buffers: '512MB' });
  await boardCli(['board', 'create', 'ack', '--column', 'title:TEXT', '--column', 'n:INTEGER'], url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.add(() => client.end());
  const { rows } = await client.query("SELECT board_no FROM board_boards WHERE board_id = 'ack'");
  const table = `board_${rows[0].board_no}`;
  await client.query(
    'CREATE TABLE plain_ack (id text PRIMARY KEY, updated_at timestamptz NOT NULL, state text, title text, n bigint)',
  );
  const head = `b AS (UPDATE board_boards SET head = head + 1 WHERE board_id = 'ack'
      RETURNING head, (extract(epoch FROM now()) * 1000000)::bigint AS now_us)`;
  // As the node's statement: the rows from the JSON, joined with the head advance.
  const row = `INSERT INTO ${table} (id, updated_at, state, title, n)
      SELECT x.id, now(), x.state, x.title, x.n
      FROM b, jsonb_to_recordset($1::jsonb) AS x(id text, state text, title text, n bigint)`;
  const change = `c AS (INSERT INTO board_changes (board_id, seq, kind, payload, actor)
      SELECT 'ack', b.head, 'insert', jsonb_build_object('updatedAt', b.now_us, 'rows', $1::jsonb), NULL FROM b)`;
  const variants = {
    plain: 'INSERT INTO plain_ack (id, updated_at, state, title, n) VALUES ($1, now(), $2, $3, $4)',
    '+head': `WITH ${head}, r AS (${row}) SELECT b.head FROM b`,
    '+change': `WITH ${head}, r AS (${row}), ${change} SELECT b.head FROM b`,
    '+notify': `WITH ${head}, r AS (${row}), ${change}
      SELECT b.head, pg_notify('board_changes', 'ack:' || b.head::text) FROM b`,
  };
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  let i = 0;
  const run = async (name) => {
    const id = `r-${name}-${i++}`;
    const rowsJson = JSON.stringify([{ id, state: 'open', title: 'hello', n: i }]);
    const values = name === 'plain' ? [id, 'open', 'hello', i] : [rowsJson];
    const t = performance.now();
    await client.query({ name: `v${Object.keys(variants).indexOf(name)}`, text: variants[name], values });
    return performance.now() - t;
  };
  for (let w = 0; w < 50; w++) for (const name of Object.keys(variants)) await run(name);
  for (let r = 0; r < RUNS; r++) for (const name of Object.keys(variants)) times[name].push(await run(name));
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const base = quantile(times.plain, 0.5);
  console.log(`\ninsert ack parts, ${RUNS} interleaved runs each (load average ${load})`);
  console.log('| statement | p50 | p99 | p50 / plain |\n|---|---:|---:|---:|');
  for (const [name, xs] of Object.entries(times)) {
    console.log(
      `| ${name} | ${ms(quantile(xs, 0.5))} | ${ms(quantile(xs, 0.99))} | ${(quantile(xs, 0.5) / base).toFixed(2)}x |`,
    );
  }
}

try {
  await main();
} finally {
  await cleanups.run();
}
