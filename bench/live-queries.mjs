// Issue 38: live SQL queries (`POST /live`) against what clients do without them (follow `/watch`
// and re-run their query with `query.execute` after each change), side by side on one board-node
// and one board of ROWS rows (default 1,000,000: id, grp TEXT of 16 values, points INTEGER).
//   A. SUBS subscribers (default 1000) of one GROUP BY:
//        SELECT grp, count(*) AS n, sum(points) AS p FROM {{t}} GROUP BY grp ORDER BY grp
//   B. QUERIES distinct queries (default 100), one subscriber each:
//        SELECT count(*) AS n, sum(points) AS p FROM {{t}} WHERE grp = $1 AND points >= $2
//      (100 different parameter pairs)
// For each scenario and each way, single-row updates (each changes every result of A, and the
// results of B whose group it touches) spaced apart; measured from the write's acknowledgement to
// the moment each subscriber holds the result at that write's watermark (a live subscriber applies
// the `result`/`diff` events it receives; a re-running client has the `query.execute` answer).
// Reported: p50/p99 over every (write, subscriber), and over writes of the slowest subscriber;
// DuckDB executions per write (node.stats: live.evaluations for live, queries for re-run).
// Subscribers are raw HTTP streams in this process (this process shares the machine's 2 cores
// with the node and PostgreSQL, so its own parsing is part of the measured time).
// Usage: node bench/live-queries.mjs   env: BENCH_ROWS, BENCH_SUBS, BENCH_QUERIES, BENCH_WRITES
//   (live writes, default 30), BENCH_RERUN_WRITES (re-run writes, default 5)
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { applyLiveDiff } from '@board/protocol';
import {
  boardCli,
  rpc as boardRpc,
  cleanups,
  NODE_BIN,
  quantile,
  startBoardNode,
  startPostgres,
} from './lib/board.mjs';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const SUBS = Number(process.env.BENCH_SUBS ?? 1000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 100);
const WRITES = Number(process.env.BENCH_WRITES ?? 30);
const RERUN_WRITES = Number(process.env.BENCH_RERUN_WRITES ?? 5);
const BOARD = 'livebench';
const T = [{ token: 't', entity: 'items' }];
const GROUP_BY = 'SELECT grp, count(*) AS n, sum(points) AS p FROM {{t}} GROUP BY grp ORDER BY grp';
const FILTERED = 'SELECT count(*) AS n, sum(points) AS p FROM {{t}} WHERE grp = $1 AND points >= $2';

// File descriptors: two streams per subscriber at most, here and in the node.
const needed = 2 * SUBS + 500;
if (!process.env.BENCH_ULIMIT_RAISED) {
  const soft = Number(spawnSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (soft < needed) {
    const r = spawnSync(
      'bash',
      ['-c', `ulimit -n ${needed} && exec "$0" "$@"`, process.execPath, ...process.argv.slice(1)],
      { stdio: 'inherit', env: { ...process.env, BENCH_ULIMIT_RAISED: '1' } },
    );
    process.exit(r.status ?? 1);
  }
}

const ms = (x) => `${x.toFixed(1)} ms`;
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const rpc = (base, procedure, body) => boardRpc(base, BOARD, procedure, body);
/** Re-runs that failed (and were sent again). */
let rerunFailures = 0;
const agent = new Agent({ keepAlive: true, maxSockets: 2 * SUBS });

/** Splits an HTTP body into SSE events; calls `onEvent(event, data, id)` for each. */
function sseReader(onEvent) {
  let buf = '';
  return (chunk) => {
    buf += chunk;
    for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = '';
      let data = '';
      let id;
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data = line.slice(6);
        else if (line.startsWith('id: ')) id = Number(line.slice(4));
      }
      if (event) onEvent(event, data, id);
    }
  };
}

/** Opens a stream (`POST /live` or `GET /watch`); resolves with the request once its head came. */
function openStream(base, path, method, body, onEvent) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port: Number(port),
        path,
        method,
        agent: false,
        headers: { 'x-data-board': BOARD, 'content-type': 'application/json' },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`${path} answered ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', sseReader(onEvent));
        resolve(req);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A live subscriber: holds the result (applies each diff) and, per watermark, the time it first
 * held a result at or past it (`heldAt(w)`).
 */
function liveSubscriber(base, sql, params) {
  let rows;
  let at = -1;
  const waits = [];
  const sub = {
    rows: () => rows,
    heldAt: (w) => (at >= w ? Promise.resolve(performance.now()) : new Promise((r) => waits.push({ w, r }))),
    open: () =>
      openStream(base, '/live', 'POST', JSON.stringify({ sql, tables: T, params }), (event, data) => {
        if (event === 'error') throw new Error(`live error: ${data}`);
        const d = JSON.parse(data);
        rows = event === 'result' ? d.rows : applyLiveDiff(rows, d);
        at = d.watermark;
        const now = performance.now();
        for (let i = waits.length - 1; i >= 0; i--) {
          if (waits[i].w <= at) waits.splice(i, 1)[0].r(now);
        }
      }),
  };
  return sub;
}

/** A re-running client: follows /watch and re-runs its query after each change it sees. */
function rerunClient(base, sql, params) {
  let at = -1;
  const waits = [];
  const { hostname, port } = new URL(base);
  // Retried after a failure (a connection reset, or a QueryTimeout when the board's readers stayed
  // busy with the other clients' re-runs), as a client would: the failures are counted.
  const run = async (minWatermark) => {
    for (;;) {
      try {
        return await runOnce(minWatermark);
      } catch {
        rerunFailures++;
      }
    }
  };
  const runOnce = (minWatermark) =>
    new Promise((resolve, reject) => {
      const req = request(
        {
          host: hostname,
          port: Number(port),
          path: '/rpc/query.execute',
          method: 'POST',
          agent,
          headers: { 'x-data-board': BOARD, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c) => {
            text += c;
          });
          res.on('end', () => {
            const env = JSON.parse(text);
            if (env.status !== 'ok') return reject(new Error(JSON.stringify(env.error)));
            resolve(env.value.watermark);
          });
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ sql, tables: T, params, minWatermark }));
    });
  return {
    heldAt: (w) => (at >= w ? Promise.resolve(performance.now()) : new Promise((r) => waits.push({ w, r }))),
    open: async () => {
      at = await run(0);
      return await openStream(base, '/watch', 'GET', undefined, (event, _data, id) => {
        if (event !== 'change') return;
        void run(id).then((w) => {
          if (w <= at) return;
          at = w;
          const now = performance.now();
          for (let i = waits.length - 1; i >= 0; i--) if (waits[i].w <= at) waits.splice(i, 1)[0].r(now);
        });
      });
    },
  };
}

async function openAll(clients) {
  const streams = [];
  for (let i = 0; i < clients.length; i += 100) {
    streams.push(...(await Promise.all(clients.slice(i, i + 100).map((c) => c.open()))));
  }
  return streams;
}

/** `writes` single-row updates, 300 ms apart (after every client held the previous one). */
async function measure(base, clients, writes, counter) {
  const each = [];
  const slowest = [];
  let executions = 0;
  for (let i = 0; i < writes; i++) {
    const id = `r${Math.floor(Math.random() * ROWS)}`;
    const before = await counter();
    const { watermark } = await rpc(base, 'mutate.update', {
      updates: [{ id, patch: { points: Math.floor(Math.random() * 1000) } }],
    });
    const acked = performance.now();
    const held = await Promise.all(clients.map((c) => c.heldAt(watermark)));
    const lat = held.map((t) => Math.max(0, t - acked));
    each.push(...lat);
    slowest.push(Math.max(...lat));
    // Executions this write caused (let the re-runs that are still in flight finish first).
    await sleep(300);
    executions += (await counter()) - before;
  }
  return { each, slowest, perWrite: executions / writes };
}

async function load(base) {
  const t0 = performance.now();
  const batch = 10_000;
  for (let i = 0; i < ROWS; i += batch) {
    const rows = [];
    for (let j = i; j < Math.min(ROWS, i + batch); j++) {
      rows.push({ id: `r${j}`, grp: `g${j % 16}`, points: (j * 7919) % 1000 });
    }
    await rpc(base, 'mutate.insert', { rows });
  }
  console.log(`loaded ${ROWS} rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const q = await rpc(base, 'query.execute', { sql: GROUP_BY, tables: T });
  const t1 = performance.now();
  for (let i = 0; i < 5; i++) await rpc(base, 'query.execute', { sql: GROUP_BY, tables: T });
  console.log(
    `GROUP BY over the board: ${q.result.rows.length} rows, ${((performance.now() - t1) / 5).toFixed(1)} ms per query.execute`,
  );
}

async function main() {
  const url = await startPostgres();
  await boardCli(
    ['board', 'create', BOARD, '--column', 'grp:TEXT', '--column', 'points:INTEGER'],
    url,
    NODE_BIN,
  );
  const { base } = await startBoardNode(url, { id: 'bench-live' });
  await load(base);
  const stats = () => rpc(base, 'node.stats', {});
  const liveCount = async () => (await stats()).live.evaluations;
  const rerunCount = async () => (await stats()).queries;
  const loadAvg = async () => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
  const table = [];
  const scenarios = [
    {
      // The evaluation alone (sync + GROUP BY + one stream): what the fan-out to 1,000 adds to.
      name: '1 subscriber of the GROUP BY',
      liveOnly: true,
      make: () => [liveSubscriber(base, GROUP_BY, [])],
    },
    {
      name: `A: ${SUBS} subscribers of one GROUP BY`,
      make: (kind) =>
        Array.from({ length: SUBS }, () =>
          (kind === 'live' ? liveSubscriber : rerunClient)(base, GROUP_BY, []),
        ),
    },
    {
      name: `B: ${QUERIES} distinct queries`,
      make: (kind) =>
        Array.from({ length: QUERIES }, (_v, i) =>
          (kind === 'live' ? liveSubscriber : rerunClient)(base, FILTERED, [`g${i % 16}`, (i * 10) % 1000]),
        ),
    },
  ];
  for (const s of scenarios) {
    for (const kind of s.liveOnly ? ['live'] : ['live', 're-run on /watch']) {
      const clients = s.make(kind === 'live' ? 'live' : 'rerun');
      const streams = await openAll(clients);
      await sleep(1000);
      const avg = await loadAvg();
      const writes = kind === 'live' ? WRITES : RERUN_WRITES;
      const failedBefore = rerunFailures;
      const r = await measure(base, clients, writes, kind === 'live' ? liveCount : rerunCount);
      const line = {
        scenario: s.name,
        way: kind,
        writes,
        p50: quantile(r.each, 0.5),
        p99: quantile(r.each, 0.99),
        slowestP50: quantile(r.slowest, 0.5),
        slowestP99: quantile(r.slowest, 0.99),
        executions: r.perWrite,
        load: avg,
        failures: rerunFailures - failedBefore,
      };
      table.push(line);
      console.log(
        `${s.name}, ${kind}: ${writes} writes; write ack -> subscriber holds the result p50 ${ms(line.p50)} p99 ${ms(line.p99)}; all subscribers p50 ${ms(line.slowestP50)} p99 ${ms(line.slowestP99)}; DuckDB executions per write ${line.executions.toFixed(1)}${line.failures ? ` (plus ${line.failures} re-runs that failed and were sent again)` : ''} (load ${avg})`,
      );
      for (const st of streams) st.destroy();
      await sleep(1500);
    }
  }
  console.log(
    '\n| scenario | way | writes | p50 | p99 | all held p50 | all held p99 | DuckDB executions / write |',
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const l of table) {
    console.log(
      `| ${l.scenario} | ${l.way} | ${l.writes} | ${ms(l.p50)} | ${ms(l.p99)} | ${ms(l.slowestP50)} | ${ms(l.slowestP99)} | ${l.executions.toFixed(1)} |`,
    );
  }
  for (let i = 0; i < table.length; i++) {
    const [live, rerun] = [table[i], table[i + 1]];
    if (rerun?.scenario !== live.scenario) continue;
    console.log(
      `${live.scenario}: p99 ${(rerun.p99 / live.p99).toFixed(1)}x lower live; ${(rerun.executions / live.executions).toFixed(1)}x fewer DuckDB executions`,
    );
  }
  console.log(`uptime: ${spawnSync('uptime', { encoding: 'utf8' }).stdout.trim()}`);
}

// Whatever ends the bench, the node and PostgreSQL it started go too.
for (const signal of ['SIGINT', 'SIGTERM'])
  process.once(signal, () => cleanups.run().then(() => process.exit(130)));
process.once('uncaughtException', (err) => {
  console.error(err);
  cleanups.run().then(() => process.exit(1));
});

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => cleanups.run());
