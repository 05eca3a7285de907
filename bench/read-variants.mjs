// Issue 18 point 2: point-query throughput of board-node variants that differ only in their
// environment (e.g. UV_THREADPOOL_SIZE, the libuv threadpool DuckDB's async calls run on), against
// the plain node:http + pg endpoint (bench/plain-endpoint.mjs), all on one PostgreSQL 15 server and
// one board, in the same run: sequential p50/p99 (interleaved request by request), then 32 requests
// in flight (closed loop, ROUNDS alternating rounds of SECS seconds per side). For the 32-in-flight
// rounds it also prints the CPU time per request (user + system, from /proc) of the server process,
// of all PostgreSQL processes together and of this load generator: on two shared cores the rounds
// are CPU-bound, so that is where throughput goes.
// Usage: VARIANTS='{"base":{},"uv16":{"UV_THREADPOOL_SIZE":"16"}}' node bench/read-variants.mjs
//   a variant's BENCH_BIN: another build's board-node for that variant (e.g. main's, before/after)
//   ROWS (100000), SECS (3), ROUNDS (3); BOARD_BENCH_BIN: another build's board-node;
//   BENCH_NODE_ARGS: node flags for the board-nodes, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'.
import { execFile as execFileCb, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { TestPostgres } from '@support/pg/test-server';
import pg from 'pg';

const execFile = promisify(execFileCb);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = process.env.BOARD_BENCH_BIN ?? join(ROOT, 'packages/board-server/bin/board-node.js');
const N = Number(process.env.ROWS ?? 100000);
const SECS = Number(process.env.SECS ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const VARIANTS = JSON.parse(process.env.VARIANTS ?? '{"base":{}}');
const cleanups = [];
/** Server pid by base URL, for CPU accounting. */
const pids = new Map();
const TICK = 100; // USER_HZ
/** CPU seconds (user + system) a process has used so far. */
async function cpuOf(pid) {
  try {
    const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch {
    return 0;
  }
}
/** CPU seconds used so far by every postgres process (the shared server's backends). */
async function postgresCpu() {
  let total = 0;
  for (const d of await readdir('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if ((await readFile(`/proc/${d}/comm`, 'utf8')).trim() !== 'postgres') continue;
      total += await cpuOf(d);
    } catch {}
  }
  return total;
}
async function cpuSnapshot(pid) {
  const self = process.cpuUsage();
  return { server: await cpuOf(pid), pg: await postgresCpu(), client: (self.user + self.system) / 1e6 };
}
const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
async function child(args, env) {
  const proc = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const base = await new Promise((res, rej) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (m) res(m[1]);
    });
    proc.once('exit', (c) => rej(new Error(`exit ${c}`)));
  });
  pids.set(base, proc.pid);
  cleanups.push(async () => {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
  });
  return base;
}
async function post(base, path, headers, body) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const env = await res.json();
  if (env.status !== 'ok') throw new Error(JSON.stringify(env.error));
  return env.value;
}
async function closedLoop(n, secs, call) {
  const lat = [];
  const end = performance.now() + secs * 1000;
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await call(i++);
        lat.push(performance.now() - t);
      }
    }),
  );
  return lat;
}
try {
  const server = await TestPostgres.start({ fsync: 'on', max_connections: '200', shared_buffers: '256MB' });
  cleanups.push(() => server.destroy());
  const url = server.url();
  await execFile(
    process.execPath,
    [BIN, 'board', 'create', 'b', '--column', 'grp:INTEGER', '--column', 'val:DOUBLE'],
    { env: { PATH: process.env.PATH, DATABASE_URL: url, BOARD_DATA_DIR: tmpdir(), BOARD_LOG_LEVEL: 'warn' } },
  );
  const nodes = {};
  for (const [name, env] of Object.entries(VARIANTS)) {
    const dir = await mkdtemp(join(tmpdir(), 'exp-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    // BENCH_NODE_ARGS: node flags for the board-nodes, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'
    const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
    nodes[name] = await child([...nodeArgs, env.BENCH_BIN ?? BIN], {
      DATABASE_URL: url,
      BOARD_DATA_DIR: dir,
      BOARD_PORT: '0',
      BOARD_AUTH: 'off',
      BOARD_LOG_LEVEL: 'warn',
      ...env,
    });
  }
  const first = Object.values(nodes)[0];
  for (let i = 0; i < N; i += 10000)
    await post(
      first,
      '/rpc/mutate.insert',
      { 'x-data-board': 'b' },
      {
        rows: Array.from({ length: Math.min(10000, N - i) }, (_, j) => ({
          id: `r${i + j}`,
          grp: (i + j) % 100,
          val: j,
        })),
      },
    );
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  cleanups.push(() => c.end());
  const table = `board_${(await c.query("SELECT board_no FROM board_boards WHERE board_id='b'")).rows[0].board_no}`;
  await c.query(`VACUUM ANALYZE ${table}`);
  const plain = await child([join(ROOT, 'bench/plain-endpoint.mjs')], { DATABASE_URL: url });
  const sql = 'SELECT * FROM {{t}} WHERE id = $1';
  const id = () => `r${Math.floor(Math.random() * N)}`;
  const calls = {
    plain: () => post(plain, '/rpc/query.execute', { 'x-plain-table': table }, { sql, params: [id()] }),
  };
  /** The node's own account of each sequential query (`syncMs`: head read; `queryMs`: DuckDB). */
  const own = Object.fromEntries(Object.keys(nodes).map((k) => [k, { syncMs: [], queryMs: [] }]));
  let sequential = false;
  for (const [name, base] of Object.entries(nodes))
    calls[name] = async () => {
      const v = await post(
        base,
        '/rpc/query.execute',
        { 'x-data-board': 'b' },
        { sql, tables: [{ token: 't', entity: 'items' }], params: [id()] },
      );
      if (sequential) for (const f of ['syncMs', 'queryMs']) own[name][f].push(v[f]);
      return v;
    };
  for (const call of Object.values(calls)) for (let i = 0; i < 300; i++) await call();
  const seq = Object.fromEntries(Object.keys(calls).map((k) => [k, []]));
  sequential = true;
  for (let i = 0; i < 400; i++)
    for (const [k, call] of Object.entries(calls)) {
      const t = performance.now();
      await call();
      seq[k].push(performance.now() - t);
    }
  sequential = false;
  const conc = Object.fromEntries(Object.keys(calls).map((k) => [k, []]));
  const cpu = Object.fromEntries(Object.keys(calls).map((k) => [k, { server: 0, pg: 0, client: 0 }]));
  const baseOf = { plain, ...nodes };
  for (let r = 0; r < ROUNDS; r++)
    for (const [k, call] of Object.entries(calls)) {
      const before = await cpuSnapshot(pids.get(baseOf[k]));
      conc[k].push(...(await closedLoop(32, SECS, call)));
      const after = await cpuSnapshot(pids.get(baseOf[k]));
      for (const part of ['server', 'pg', 'client']) cpu[k][part] += after[part] - before[part];
    }
  console.log(`load average: ${(await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ')}`);
  console.log(
    '| variant | seq p50 | seq p99 | 32 in flight req/s | 32 in flight p99 | vs plain (req/s) | CPU ms per request: server / postgres / client |',
  );
  const prps = conc.plain.length / (SECS * ROUNDS);
  for (const k of Object.keys(calls)) {
    const rps = conc[k].length / (SECS * ROUNDS);
    console.log(
      `| ${k} | ${q(seq[k], 0.5).toFixed(2)} ms | ${q(seq[k], 0.99).toFixed(2)} ms | ${rps.toFixed(0)} | ${q(conc[k], 0.99).toFixed(1)} ms | ${(rps / prps).toFixed(2)}x | ${['server', 'pg', 'client'].map((p) => ((cpu[k][p] * 1000) / conc[k].length).toFixed(3)).join(' / ')} |`,
    );
  }
  for (const [name, base] of Object.entries(nodes)) {
    console.log(
      `${name}: sequential, as the node reports it: p50 syncMs ${q(own[name].syncMs, 0.5).toFixed(2)}, queryMs ${q(own[name].queryMs, 0.5).toFixed(2)}`,
    );
    const r = (await post(base, '/rpc/node.stats', { 'x-data-board': 'b' }, {})).replicas;
    if (r.batches !== undefined)
      console.log(
        `${name}: ${r.batchedQueries} point queries answered in ${r.batches} batches (${(r.batchedQueries / Math.max(1, r.batches)).toFixed(1)} per batch)`,
      );
  }
} finally {
  for (const f of cleanups.reverse()) await f().catch(() => {});
}
