// Board data service benchmarks, each printing a ratio measured side by side in one run:
//   a) point query by id on a 100k-row board: board-node vs the same query straight on Postgres (pg)
//   b) GROUP BY over 1M rows: board-node (DuckDB replica) vs straight on Postgres
//   c) single-row insert acknowledgement: board-node mutate.insert vs a plain pg INSERT
//   d) change propagation to a watcher on the writing node and on a second node (p50, p99)
//   s) issue 18, against a plain node:http + pg endpoint (bench/plain-endpoint.mjs) on the same
//      Postgres: point query by id on a 1M-row board (sequential p50; 32 in flight: throughput and
//      p99), single-row insert ack, GROUP BY over 1M rows; printed as ratios
// Usage: node bench/board.mjs [a|b|c|d|s ...]   (default: a b c d). Needs the Debian postgresql-15
// server binaries (scripts/test.sh installs them) and a build (`npm run build`).
// Everything runs on loopback: a PostgreSQL 15 server on a free port shared by the board-nodes
// (DATABASE_URL) and by the plain pg client, so both sides hit the same engine and settings.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import {
  cleanups,
  boardCli as cli,
  closedLoop,
  plainRpc,
  quantile,
  rpc,
  startBoardNode,
  startPlain as startPlainProcess,
  startPostgres as startPostgresServer,
} from './lib/board.mjs';

const which = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['a', 'b', 'c', 'd'];
/** Rows of the GROUP BY / point-query board (BENCH_ROWS shrinks it for a smoke run). */
const ROWS_B = Number(process.env.BENCH_ROWS ?? 1_000_000);

const median = (xs) => quantile(xs, 0.5);
const ms = (x) => `${x.toFixed(2)} ms`;

/** A PostgreSQL 15 server on a free loopback port (durable, as in production), removed at the end. */
const startPostgres = () => startPostgresServer({ shared_buffers: '512MB' });
/** A board-node (BOARD_BENCH_BIN: another build's, e.g. main's, for a before/after run). */
const startNode = async (url, id) => (await startBoardNode(url, { id })).base;
/** The plain endpoint (bench/plain-endpoint.mjs) as a child process on the same Postgres. */
const startPlain = async (url) => (await startPlainProcess(url)).base;

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
  cleanups.add(() => client.end());
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

  let loadedB = false;
  const loadB = async () => {
    if (loadedB) return;
    loadedB = true;
    const N = ROWS_B;
    const t0 = performance.now();
    await load(nodeA, 'bench_b', N, (j) => ({ id: `r${j}`, grp: j % 100, val: (j * 7919) % 1000 }));
    console.log(
      `\n(loaded ${ROWS_B} rows through mutate.insert in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
    );
    await client.query(`VACUUM ANALYZE ${await boardTable(client, 'bench_b')}`);
  };
  const GROUP_SQL =
    'SELECT grp, count(*) AS n, sum(val) AS total, avg(val) AS mean FROM {{t}} GROUP BY grp ORDER BY grp';

  if (which.includes('b')) {
    await loadB();
    const table = await boardTable(client, 'bench_b');
    const sql = GROUP_SQL;
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

  if (which.includes('s')) await scale(client, url, nodeA, loadB, GROUP_SQL);

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

/** `node bench/watchers.mjs 1000` as a child process: its write -> every watcher p99, and more. */
function fanOut1000() {
  const r = spawnSync(process.execPath, [join(import.meta.dirname, 'watchers.mjs'), '1000'], {
    encoding: 'utf8',
    env: { ...process.env, BENCH_WRITES: process.env.BENCH_WRITES ?? '50' },
  });
  const line =
    /write -> every watcher \((\d+)\/(\d+) writes reached all.*?p99 ([\d.]+ ms).*?mean ([\d.]+ ms|n\/a)/.exec(
      r.stdout,
    );
  if (!line) return { p99: 'failed', note: (r.stderr || r.stdout).slice(-200) };
  return {
    p99: line[3],
    note: `${line[1]}/${line[2]} writes reached all; in the node, commit -> written, mean ${line[4]}`,
  };
}

/** Issue 18: board-node vs the plain node:http + pg endpoint, same Postgres, same run. */
async function scale(client, url, nodeA, loadB, groupSql) {
  const T = [{ token: 't', entity: 'items' }];
  const N = ROWS_B;
  await loadB();
  const table = await boardTable(client, 'bench_b');
  await client.query(
    'CREATE TABLE plain_s (id text PRIMARY KEY, updated_at timestamptz NOT NULL, state text, title text, n bigint)',
  );
  const plain = await startPlain(url);
  const pointSql = 'SELECT * FROM {{t}} WHERE id = $1';
  const id = () => `r${Math.floor(Math.random() * N)}`;
  const board = (params) => rpc(nodeA, 'bench_b', 'query.execute', { sql: pointSql, tables: T, params });
  const peer = (params) => plainRpc(plain, table, 'query.execute', { sql: pointSql, params });
  const t1 = performance.now();
  await rpc(nodeA, 'bench_b', 'query.execute', { sql: 'SELECT count(*) FROM {{t}}', tables: T });
  console.log(
    `\n(s) first query on the 1M-row board (replica build/catch-up): ${((performance.now() - t1) / 1000).toFixed(1)} s`,
  );
  for (let i = 0; i < 200; i++) await Promise.all([board([id()]), peer([id()])]); // warm both
  // Which path answered the node's point reads (node.stats: keyIndexReads / duckdbReads).
  const paths = async () => {
    const r = (await rpc(nodeA, 'bench_b', 'node.stats', {})).replicas;
    return { index: r.keyIndexReads ?? 0, duckdb: r.duckdbReads ?? 0 };
  };
  const share = (before, after) => {
    const index = after.index - before.index;
    const duckdb = after.duckdb - before.duckdb;
    return `${((100 * index) / Math.max(1, index + duckdb)).toFixed(1)}% key index, ${((100 * duckdb) / Math.max(1, index + duckdb)).toFixed(1)}% DuckDB (${index + duckdb} reads)`;
  };
  const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`  load average before the point reads: ${loadavg()}`);
  const pathsBefore = await paths();

  const rows = [];
  const parts = { sync: [], query: [] };
  const [pa, pb] = await sideBySide(
    1000,
    async () => {
      const v = await board([id()]);
      parts.sync.push(v.syncMs);
      parts.query.push(v.queryMs);
    },
    () => peer([id()]),
  );
  const pathsSequential = await paths();
  console.log(`  sequential point reads served by: ${share(pathsBefore, pathsSequential)}`);
  console.log(
    `  where a sequential point query's time goes (p50): total ${ms(median(pa))}; in the node: head check + sync ${ms(median(parts.sync))}, the read itself (key index lookup, or DuckDB snapshot + execute + encode) ${ms(median(parts.query))}; the rest is HTTP, JSON, auth, routing`,
  );
  rows.push([
    'point query by id, sequential, p50',
    ms(median(pa)),
    ms(median(pb)),
    `${(median(pa) / median(pb)).toFixed(2)}x`,
  ]);
  rows.push([
    'point query by id, sequential, p99',
    ms(quantile(pa, 0.99)),
    ms(quantile(pb, 0.99)),
    `${(quantile(pa, 0.99) / quantile(pb, 0.99)).toFixed(2)}x`,
  ]);

  // 32 in flight: three alternating rounds of 4 s per side, summed.
  const conc = { board: { n: 0, lat: [] }, plain: { n: 0, lat: [] } };
  for (let round = 0; round < 3; round++) {
    for (const [name, call] of [
      ['board', board],
      ['plain', peer],
    ]) {
      const r = await closedLoop(32, 4, () => call([id()]));
      conc[name].n += r.lat.length;
      conc[name].lat.push(...r.lat);
    }
  }
  const rps = (c) => c.n / 12;
  console.log(`  32-in-flight point reads served by: ${share(pathsSequential, await paths())}`);
  console.log(`  load average after the point reads: ${loadavg()}`);
  rows.push([
    'point query, 32 in flight, throughput',
    `${rps(conc.board).toFixed(0)} req/s`,
    `${rps(conc.plain).toFixed(0)} req/s`,
    `${(rps(conc.board) / rps(conc.plain)).toFixed(2)}x`,
  ]);
  rows.push([
    'point query, 32 in flight, p99',
    ms(quantile(conc.board.lat, 0.99)),
    ms(quantile(conc.plain.lat, 0.99)),
    `${(quantile(conc.board.lat, 0.99) / quantile(conc.plain.lat, 0.99)).toFixed(2)}x`,
  ]);

  const [ia, ib] = await sideBySide(
    400,
    (i) =>
      rpc(nodeA, 'bench_c', 'mutate.insert', {
        rows: [{ id: `s-${i}`, title: 'hello', n: i, state: 'open' }],
      }),
    (i) =>
      plainRpc(plain, 'plain_s', 'mutate.insert', {
        rows: [{ id: `s-${i}`, title: 'hello', n: i, state: 'open' }],
      }),
  );
  rows.push([
    'single-row insert ack, p50',
    ms(median(ia)),
    ms(median(ib)),
    `${(median(ia) / median(ib)).toFixed(2)}x`,
  ]);

  const [ga, gb] = await sideBySide(
    15,
    () => rpc(nodeA, 'bench_b', 'query.execute', { sql: groupSql, tables: T }),
    () => plainRpc(plain, table, 'query.execute', { sql: groupSql, params: [] }),
  );
  rows.push([
    'GROUP BY over 1M rows, p50',
    ms(median(ga)),
    ms(median(gb)),
    `${(median(gb) / median(ga)).toFixed(1)}x faster`,
  ]);

  // 1,000 watchers: bench/watchers.mjs in a process of its own (its own Postgres and node), so
  // that its client (1,000 sockets) shares no event loop with this bench's load generator.
  const fanout = fanOut1000();
  rows.push([
    '1,000 watchers, a change reaching all, p99',
    fanout.p99,
    'n/a (no watch)',
    `goal < 50 ms; ${fanout.note}`,
  ]);

  console.log('\n| measure | board-node | plain endpoint | ratio |\n|---|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  results.push({ name: '(s) scale', rows });
}

try {
  await main();
} finally {
  await cleanups.run();
}
