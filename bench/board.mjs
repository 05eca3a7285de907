// Board data service benchmarks, each printing a ratio measured side by side in one run:
//   a) point query by id on a 100k-row board: board-node vs the same query straight on Postgres (pg)
//   b) GROUP BY over 1M rows: board-node (DuckDB replica) vs straight on Postgres
//   c) single-row insert acknowledgement: board-node mutate.insert vs a plain pg INSERT
//   d) change propagation to a watcher on the writing node and on a second node (p50, p99)
// Usage: node bench/board.mjs [a|b|c|d ...]   (default: all). Needs the Debian postgresql-15
// server binaries (scripts/test.sh installs them) and a build (`npm run build`).
// Everything runs on loopback: a PostgreSQL 15 server on a free port shared by the board-nodes
// (DATABASE_URL) and by the plain pg client, so both sides hit the same engine and settings.
import { execFile as execFileCb, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { TestPostgres } from '@support/pg/test-server';
import pg from 'pg';

const execFile = promisify(execFileCb);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'packages/board-server/bin/board-node.js');
const which = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['a', 'b', 'c', 'd'];
const cleanups = [];

const median = (xs) => quantile(xs, 0.5);
function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}
const ms = (x) => `${x.toFixed(2)} ms`;

/** A PostgreSQL 15 server on a free loopback port (durable, as in production), removed at the end. */
async function startPostgres() {
  const server = await TestPostgres.start({ fsync: 'on', max_connections: '200', shared_buffers: '512MB' });
  cleanups.push(() => server.destroy());
  return server.url();
}

async function startNode(url, id) {
  const dataDir = await mkdtemp(join(tmpdir(), 'board-bench-node-'));
  const proc = spawn(process.execPath, [BIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: url,
      BOARD_DATA_DIR: dataDir,
      BOARD_PORT: '0',
      BOARD_AUTH: 'off',
      BOARD_NODE_ID: id,
      BOARD_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const base = await new Promise((res, rej) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (m) res(m[1]);
    });
    proc.once('exit', (c) => rej(new Error(`board-node exited ${c}`)));
  });
  cleanups.push(async () => {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
    await rm(dataDir, { recursive: true, force: true });
  });
  return base;
}

async function cli(args, url) {
  await execFile(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, DATABASE_URL: url, BOARD_DATA_DIR: tmpdir(), BOARD_LOG_LEVEL: 'warn' },
  });
}

async function rpc(base, board, procedure, body) {
  const res = await fetch(`${base}/rpc/${procedure}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-data-board': board },
    body: JSON.stringify(body),
  });
  const env = await res.json();
  if (env.status !== 'ok') throw new Error(`${procedure}: ${JSON.stringify(env.error)}`);
  return env.value;
}

async function load(base, board, n, make) {
  const batch = 10_000;
  for (let i = 0; i < n; i += batch) {
    const rows = [];
    for (let j = i; j < Math.min(n, i + batch); j++) rows.push(make(j));
    await rpc(base, board, 'mutate.insert', { rows });
  }
}

async function boardTable(client, board) {
  const r = await client.query('SELECT board_no FROM board_boards WHERE board_id = $1', [board]);
  return `board_${r.rows[0].board_no}`;
}

/** Interleaves two contenders `runs` times, returns their timings. */
async function sideBySide(runs, a, b) {
  const ta = [];
  const tb = [];
  for (let i = 0; i < runs; i++) {
    let t = performance.now();
    await a(i);
    ta.push(performance.now() - t);
    t = performance.now();
    await b(i);
    tb.push(performance.now() - t);
  }
  return [ta, tb];
}

const results = [];
function report(name, labelA, ta, labelB, tb, note = '') {
  const ra = median(ta);
  const rb = median(tb);
  console.log(`\n${name}`);
  console.log(`  ${labelA}: median ${ms(ra)}  p99 ${ms(quantile(ta, 0.99))}`);
  console.log(`  ${labelB}: median ${ms(rb)}  p99 ${ms(quantile(tb, 0.99))}`);
  console.log(`  ratio ${labelA} / ${labelB} = ${(ra / rb).toFixed(2)}x ${note}`);
  results.push({ name, labelA, ra, labelB, rb, ratio: ra / rb });
}

async function main() {
  const url = await startPostgres();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.push(() => client.end());
  await cli(['board', 'create', 'bench_a', '--column', 'title:TEXT', '--column', 'n:INTEGER'], url);
  await cli(['board', 'create', 'bench_b', '--column', 'grp:INTEGER', '--column', 'val:DOUBLE'], url);
  await cli(['board', 'create', 'bench_c', '--column', 'title:TEXT', '--column', 'n:INTEGER'], url);
  await cli(['board', 'create', 'bench_d', '--column', 'title:TEXT'], url);
  const nodeA = await startNode(url, 'bench-a');
  const T = [{ token: 't', entity: 'items' }];

  if (which.includes('a')) {
    const N = 100_000;
    await load(nodeA, 'bench_a', N, (j) => ({
      id: `row-${j}`,
      title: `title ${j}`,
      n: j,
      state: j % 2 ? 'open' : 'done',
    }));
    const table = await boardTable(client, 'bench_a');
    await client.query(`ANALYZE ${table}`);
    await rpc(nodeA, 'bench_a', 'query.execute', { sql: 'SELECT count(*) FROM {{t}}', tables: T }); // build the replica
    const ids = Array.from({ length: 400 }, () => `row-${Math.floor(Math.random() * N)}`);
    const [ta, tb] = await sideBySide(
      ids.length,
      (i) =>
        rpc(nodeA, 'bench_a', 'query.execute', {
          sql: 'SELECT * FROM {{t}} WHERE id = $1',
          tables: T,
          params: [ids[i]],
        }),
      (i) => client.query(`SELECT * FROM ${table} WHERE id = $1`, [ids[i]]),
    );
    report(
      '(a) point query by id, 100k rows',
      'board-node',
      ta,
      'pg',
      tb,
      '(board-node includes HTTP, per-request sync check, DuckDB scan)',
    );
  }

  if (which.includes('b')) {
    const N = 1_000_000;
    const t0 = performance.now();
    await load(nodeA, 'bench_b', N, (j) => ({ id: `r${j}`, grp: j % 100, val: (j * 7919) % 1000 }));
    console.log(
      `\n(loaded 1M rows through mutate.insert in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
    );
    const table = await boardTable(client, 'bench_b');
    await client.query(`VACUUM ANALYZE ${table}`);
    const sql =
      'SELECT grp, count(*) AS n, sum(val) AS total, avg(val) AS mean FROM {{t}} GROUP BY grp ORDER BY grp';
    const t1 = performance.now();
    await rpc(nodeA, 'bench_b', 'query.execute', { sql, tables: T });
    console.log(
      `(first query, replica catch-up included: ${((performance.now() - t1) / 1000).toFixed(1)} s)`,
    );
    const [ta, tb] = await sideBySide(
      15,
      () => rpc(nodeA, 'bench_b', 'query.execute', { sql, tables: T }),
      () => client.query(sql.replace('{{t}}', table)),
    );
    report('(b) GROUP BY over 1M rows', 'board-node', ta, 'pg', tb);
  }

  if (which.includes('c')) {
    await client.query(
      'CREATE TABLE plain_c (id text PRIMARY KEY, updated_at timestamptz NOT NULL, state text, title text, n bigint)',
    );
    const [ta, tb] = await sideBySide(
      400,
      (i) =>
        rpc(nodeA, 'bench_c', 'mutate.insert', {
          rows: [{ id: `c-${i}`, title: 'hello', n: i, state: 'open' }],
        }),
      (i) =>
        client.query('INSERT INTO plain_c (id, updated_at, state, title, n) VALUES ($1, now(), $2, $3, $4)', [
          `c-${i}`,
          'open',
          'hello',
          i,
        ]),
    );
    report('(c) single-row insert acknowledgement', 'board-node', ta, 'pg INSERT', tb);
  }

  if (which.includes('d')) {
    const nodeB = await startNode(url, 'bench-b');
    const arrivals = { same: new Map(), other: new Map() };
    const ctl = new AbortController();
    const follow = async (base, into) => {
      const res = await fetch(`${base}/watch`, {
        headers: { 'x-data-board': 'bench_d' },
        signal: ctl.signal,
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          buf += value;
          let i = buf.indexOf('\n\n');
          while (i >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            i = buf.indexOf('\n\n');
            const data = /data: (.*)/.exec(block)?.[1];
            if (block.includes('event: change') && data) into.set(JSON.parse(data).seq, performance.now());
          }
        }
      } catch {}
    };
    const followers = [follow(nodeA, arrivals.same), follow(nodeB, arrivals.other)];
    await new Promise((r) => setTimeout(r, 500));
    const sent = new Map();
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      const { watermark } = await rpc(nodeA, 'bench_d', 'mutate.insert', {
        rows: [{ id: `d-${i}`, title: 'x' }],
      });
      sent.set(watermark, t);
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 1500));
    ctl.abort();
    await Promise.allSettled(followers);
    const lag = (m) => [...sent].filter(([s]) => m.has(s)).map(([s, t]) => m.get(s) - t);
    const same = lag(arrivals.same);
    const other = lag(arrivals.other);
    console.log(
      `\n(d) change propagation, write start -> event received (${same.length} / ${other.length} of ${sent.size} events)`,
    );
    console.log(`  same node:   p50 ${ms(quantile(same, 0.5))}  p99 ${ms(quantile(same, 0.99))}`);
    console.log(`  second node: p50 ${ms(quantile(other, 0.5))}  p99 ${ms(quantile(other, 0.99))}`);
    console.log(`  ratio second / same (p50) = ${(quantile(other, 0.5) / quantile(same, 0.5)).toFixed(2)}x`);
    results.push({ name: '(d) propagation', same, other });
  }
}

try {
  await main();
} finally {
  for (const c of cleanups.reverse()) await c().catch(() => {});
}
