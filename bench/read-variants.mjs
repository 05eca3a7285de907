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
import { readdir, readFile } from 'node:fs/promises';
import pg from 'pg';
import {
  boardCli,
  cleanups,
  closedLoop,
  NODE_BIN,
  plainRpc,
  quantile as q,
  rpc,
  startBoardNode,
  startPlain,
  startPostgres,
} from './lib/board.mjs';

const N = Number(process.env.ROWS ?? 100000);
const SECS = Number(process.env.SECS ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const VARIANTS = JSON.parse(process.env.VARIANTS ?? '{"base":{}}');
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
try {
  const url = await startPostgres({ shared_buffers: '256MB' });
  await boardCli(['board', 'create', 'b', '--column', 'grp:INTEGER', '--column', 'val:DOUBLE'], url);
  const nodes = {};
  for (const [name, env] of Object.entries(VARIANTS)) {
    const { base, pid } = await startBoardNode(url, { bin: env.BENCH_BIN ?? NODE_BIN, id: name, env });
    nodes[name] = base;
    pids.set(base, pid);
  }
  const first = Object.values(nodes)[0];
  for (let i = 0; i < N; i += 10000)
    await rpc(first, 'b', 'mutate.insert', {
      rows: Array.from({ length: Math.min(10000, N - i) }, (_, j) => ({
        id: `r${i + j}`,
        grp: (i + j) % 100,
        val: j,
      })),
    });
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  cleanups.add(() => c.end());
  const table = `board_${(await c.query("SELECT board_no FROM board_boards WHERE board_id='b'")).rows[0].board_no}`;
  await c.query(`VACUUM ANALYZE ${table}`);
  const { base: plain, pid: plainPid } = await startPlain(url);
  pids.set(plain, plainPid);
  const sql = 'SELECT * FROM {{t}} WHERE id = $1';
  const id = () => `r${Math.floor(Math.random() * N)}`;
  const calls = {
    plain: () => plainRpc(plain, table, 'query.execute', { sql, params: [id()] }),
  };
  /** The node's own account of each sequential query (`syncMs`: head read; `queryMs`: DuckDB). */
  const own = Object.fromEntries(Object.keys(nodes).map((k) => [k, { syncMs: [], queryMs: [] }]));
  let sequential = false;
  for (const [name, base] of Object.entries(nodes))
    calls[name] = async () => {
      const v = await rpc(base, 'b', 'query.execute', {
        sql,
        tables: [{ token: 't', entity: 'items' }],
        params: [id()],
      });
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
      conc[k].push(...(await closedLoop(32, SECS, call)).lat);
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
    const r = (await rpc(base, 'b', 'node.stats', {})).replicas;
    if (r.batches !== undefined)
      console.log(
        `${name}: ${r.batchedQueries} point queries answered in ${r.batches} batches (${(r.batchedQueries / Math.max(1, r.batches)).toFixed(1)} per batch)`,
      );
  }
} finally {
  await cleanups.run();
}
