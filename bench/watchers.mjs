// Issue 18 (point 3/5): idle watchers on one board-node. For each count (default 1000 and 10000):
// open that many `GET /watch` streams of one board from this process (raw `net` sockets, no SSE
// library: the client must stay cheaper than the node), then
//   - memory per idle watcher: the node's RSS and V8 heap (its /metrics) with the streams open,
//     minus before, divided by the count (after 2 s of settling);
//   - fan-out latency: WRITES single-row inserts on the node, 200 ms apart; for each, from just
//     before the insert request to the `change` event arriving on the last of the streams
//     ("reaches all of them"), and over every (write, stream) delivery; p50/p99.
// Usage: node bench/watchers.mjs [count ...]   (default: 1000 10000)
//   BOARD_BENCH_BIN: another build's board-node instead of this checkout's
//   BENCH_COMPARE_BIN: a second build (e.g. main's) started beside it on the same Postgres and
//     board; each count is then measured on one node, then on the other, alternately
//   BENCH_WRITES: writes per count (default 50)
// Everything runs on loopback: a PostgreSQL 15 server on a free port and one board-node. Needs
// about count + 200 file descriptors in this process and in the node: the script re-runs itself
// under `ulimit -n` raised up to the hard limit when the soft one is lower.
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import {
  NODE_BIN as BIN,
  boardCli,
  rpc as boardRpc,
  cleanups,
  quantile,
  startBoardNode,
  startPostgres,
} from './lib/board.mjs';

const COMPARE = process.env.BENCH_COMPARE_BIN;
const COUNTS = process.argv.slice(2).length > 0 ? process.argv.slice(2).map(Number) : [1000, 10_000];
const WRITES = Number(process.env.BENCH_WRITES ?? 50);
const BOARD = 'fanout';

// File descriptors: one per stream here and in the node, plus Postgres connections and the rest.
const needed = Math.max(...COUNTS) + 500;
if (!process.env.BENCH_ULIMIT_RAISED) {
  const soft = Number(spawnSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (soft < needed) {
    const hard = spawnSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim();
    const limit = hard === 'unlimited' ? needed : Math.min(Number(hard), needed);
    if (limit < needed) {
      console.error(`watchers bench: needs ${needed} open files, the hard limit is ${hard}`);
      process.exit(2);
    }
    const r = spawnSync(
      'bash',
      ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, ...process.argv.slice(1)],
      { stdio: 'inherit', env: { ...process.env, BENCH_ULIMIT_RAISED: '1' } },
    );
    process.exit(r.status ?? 1);
  }
}

const ms = (x) => `${x.toFixed(1)} ms`;
const sleep = (t) => new Promise((r) => setTimeout(r, t));

const startNode = (url, bin) => startBoardNode(url, { bin, id: 'bench-watch' });
const rpc = (base, procedure, body) => boardRpc(base, BOARD, procedure, body);

/**
 * The node's memory (RSS from /proc, V8 heap used from its /metrics) and its change-lag histogram's
 * sum and count (from a change's commit to its write on a stream, as the node measures it).
 */
async function nodeMemory(base, pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const num = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(metrics)?.[1] ?? Number.NaN);
  return {
    rss,
    heap: num('nodejs_heap_size_used_bytes'),
    lagSum: num('board_node_change_lag_seconds_sum'),
    lagCount: num('board_node_change_lag_seconds_count'),
  };
}

/**
 * Opens `count` watch streams (at most 200 connecting at once), each recording when every seq
 * arrived into `arrivals` (seq -> array of arrival times).
 */
async function openWatchers(base, count, arrivals) {
  const { hostname, port } = new URL(base);
  const sockets = [];
  const request = `GET /watch HTTP/1.1\r\nhost: ${hostname}\r\nx-data-board: ${BOARD}\r\naccept: text/event-stream\r\n\r\n`;
  const openOne = () =>
    new Promise((res, rej) => {
      const s = connect(Number(port), hostname);
      s.setEncoding('latin1');
      let head = true;
      s.on('data', (d) => {
        if (head) {
          if (!d.startsWith('HTTP/1.1 200')) return rej(new Error(`watch answered ${d.slice(0, 80)}`));
          head = false;
          res(s);
          d = d.slice(d.indexOf('\r\n\r\n') + 4);
        }
        const now = performance.now();
        // One frame per chunk in practice; scan for every `id:` line anyway.
        for (const m of d.matchAll(/\nid: (\d+)\n/g)) arrivals.get(Number(m[1]))?.push(now);
      });
      s.once('error', rej);
      s.write(request);
    });
  for (let i = 0; i < count; i += 200) {
    const batch = await Promise.all(Array.from({ length: Math.min(200, count - i) }, openOne));
    sockets.push(...batch);
  }
  return sockets;
}

async function waitWatchers(base, n) {
  for (let i = 0; i < 600; i++) {
    const stats = await rpc(base, 'node.stats', {});
    if (stats.watchers === n) return;
    await sleep(100);
  }
  throw new Error(`the node never reported ${n} watchers`);
}

async function main() {
  const url = await startPostgres();
  await boardCli(['board', 'create', BOARD, '--column', 'title:TEXT'], url, BIN);
  const nodes = [{ name: 'this build', ...(await startNode(url, BIN)) }];
  if (COMPARE) nodes.push({ name: 'compared build', ...(await startNode(url, COMPARE)) });
  // Warm the nodes: a write, seen by both.
  await rpc(nodes[0].base, 'mutate.insert', { rows: [{ id: 'warm', title: 'x' }] });
  const rows = [];
  let written = 1;
  for (const count of COUNTS) {
    for (const { name, base, pid } of nodes) {
      for (let i = 0; i < 300; i++) await rpc(base, 'node.stats', {});
      await sleep(1000);
      const before = await nodeMemory(base, pid);
      const arrivals = new Map();
      const t0 = performance.now();
      const sockets = await openWatchers(base, count, arrivals);
      await waitWatchers(base, count);
      const openSec = (performance.now() - t0) / 1000;
      await sleep(2000);
      // Some requests, so that the young generation is collected and short-lived garbage from
      // opening the streams does not count as per-watcher memory.
      for (let i = 0; i < 300; i++) await rpc(base, 'node.stats', {});
      await sleep(1000);
      const after = await nodeMemory(base, pid);
      const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
      const toAll = [];
      const each = [];
      let complete = 0;
      for (let w = 0; w < WRITES; w++) {
        const times = [];
        const t = performance.now();
        // The seq is known only from the answer, so arrivals are keyed by the seq this write will get.
        arrivals.set(written + 1, times);
        const { watermark } = await rpc(base, 'mutate.insert', {
          rows: [{ id: `w-${name}-${count}-${w}`, title: 'x' }],
        });
        written++;
        if (watermark !== written) throw new Error(`unexpected watermark ${watermark}`);
        for (let i = 0; i < 250 && times.length < count; i++) await sleep(20);
        if (times.length === count) complete++;
        for (const a of times) each.push(a - t);
        if (times.length > 0) toAll.push(Math.max(...times) - t);
        await sleep(200);
      }
      const end = await nodeMemory(base, pid);
      // Node side: mean time from commit to the write on a stream, over every delivery.
      const nodeLag = ((end.lagSum - after.lagSum) / (end.lagCount - after.lagCount)) * 1000;
      const rssEach = (after.rss - before.rss) / count;
      const heapEach = (after.heap - before.heap) / count;
      console.log(
        `\n${name}: ${count} idle watchers (opened in ${openSec.toFixed(1)} s; load average ${load}): node RSS +${(rssEach / 1024).toFixed(1)} KiB and V8 heap +${(heapEach / 1024).toFixed(1)} KiB per watcher (RSS ${(before.rss / 2 ** 20).toFixed(0)} -> ${(after.rss / 2 ** 20).toFixed(0)} MiB)`,
      );
      console.log(
        `  slowest writes -> all: ${[...toAll]
          .sort((a, b) => b - a)
          .slice(0, 5)
          .map((x) => ms(x))
          .join(', ')} (write numbers ${[...toAll.keys()]
          .sort((a, b) => toAll[b] - toAll[a])
          .slice(0, 5)
          .join(', ')})`,
      );
      console.log(
        `  write -> every watcher (${complete}/${WRITES} writes reached all ${count}): p50 ${ms(quantile(toAll, 0.5))}  p99 ${ms(quantile(toAll, 0.99))}; each delivery p50 ${ms(quantile(each, 0.5))}  p99 ${ms(quantile(each, 0.99))}; in the node, commit -> written to the stream: mean ${Number.isNaN(nodeLag) ? 'n/a' : ms(nodeLag)}`,
      );
      rows.push([
        name,
        count,
        `${(rssEach / 1024).toFixed(1)} KiB`,
        `${(heapEach / 1024).toFixed(1)} KiB`,
        ms(quantile(toAll, 0.5)),
        ms(quantile(toAll, 0.99)),
        ms(quantile(each, 0.99)),
        Number.isNaN(nodeLag) ? 'n/a' : ms(nodeLag),
        `${complete}/${WRITES}`,
        load,
      ]);
      for (const s of sockets) s.destroy();
      await waitWatchers(base, 0);
    }
  }
  console.log(
    '\n| node | watchers | RSS per watcher | heap per watcher | write -> all, p50 | write -> all, p99 | each delivery, p99 | in the node, mean | writes reaching all | load average |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

try {
  await main();
} finally {
  await cleanups.run();
}
