// board-router benchmarks, each printing a ratio measured side by side in one run:
//   a) router overhead: point query by id, through board-router (over that one node) vs straight
//      to the node; p50 and p99, ratio and added milliseconds
//   c) issue 18, balancing: three nodes, one answering every request 200 ms late; and the (b) case
//      (one of two nodes 100 ms late on 10%); latency-aware default vs round robin vs hedging off
//   b) one slow node: two nodes, one behind a proxy that delays 10% of its requests by 100 ms;
//      p99 through a router with hedging on vs off (ratio off / on)
// Usage: node bench/router.mjs [a|b ...]   (default: both). Needs the Debian postgresql-15 server
// binaries (scripts/test.sh installs them) and a build (`npm run build`). Everything is on loopback.
import { Agent, createServer as createHttpServer, request } from 'node:http';
import { join } from 'node:path';
import {
  boardCli,
  cleanups,
  quantile,
  ROOT,
  rpc,
  spawnListening,
  startBoardNode,
  startPostgres,
} from './lib/board.mjs';

const ROUTER_BIN = join(ROOT, 'packages/board-router/bin/board-router.js');
const which = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['a', 'b', 'c'];
const ms = (x) => `${x.toFixed(2)} ms`;

const startNode = async (url, id) => (await startBoardNode(url, { id })).base;
const startRouter = async (nodes, extra = []) =>
  (
    await spawnListening(
      ROUTER_BIN,
      ['--nodes', nodes.join(','), '--port', '0', '--log-level', 'warn', ...extra],
      {},
    )
  ).base;

/** A proxy that delays `share` of the requests it forwards by `delayMs` (a slow node). */
async function startDelayProxy(target, share, delayMs) {
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  let n = 0;
  const server = createHttpServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const slow = req.url.startsWith('/rpc/') && ++n % Math.round(1 / share) === 0;
      const forward = () => {
        const up = request(
          {
            host: t.hostname,
            port: Number(t.port),
            path: req.url,
            method: req.method,
            headers: req.headers,
            agent,
          },
          (ures) => {
            res.writeHead(ures.statusCode, ures.headers);
            ures.pipe(res);
          },
        );
        up.on('error', () => res.destroy());
        res.on('close', () => up.destroy());
        up.end(Buffer.concat(chunks));
      };
      if (slow) setTimeout(forward, delayMs);
      else forward();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  cleanups.add(async () => {
    server.closeAllConnections();
    server.close();
    agent.destroy();
  });
  return `http://127.0.0.1:${server.address().port}`;
}

const T = [{ token: 't', entity: 'items' }];
const point = (base, i) =>
  rpc(base, 'bench_r', 'query.execute', {
    sql: 'SELECT * FROM {{t}} WHERE id = $1',
    tables: T,
    params: [`r-${(i * 7919) % 10_000}`],
  });

async function main() {
  const url = await startPostgres();
  await boardCli(['board', 'create', 'bench_r', '--column', 'title:TEXT'], url);
  const [n1, n2] = await Promise.all([startNode(url, 'bench-1'), startNode(url, 'bench-2')]);
  const rows = [];
  for (let j = 0; j < 10_000; j++) rows.push({ id: `r-${j}`, title: `row ${j}` });
  await rpc(n1, 'bench_r', 'mutate.insert', { rows });
  const lines = [];

  if (which.includes('a')) {
    const router = await startRouter([n1]);
    for (let i = 0; i < 200; i++) await point(router, i); // warm both paths (same node)
    const direct = [];
    const routed = [];
    for (let i = 0; i < 2000; i++) {
      let t = performance.now();
      await point(n1, i);
      direct.push(performance.now() - t);
      t = performance.now();
      await point(router, i);
      routed.push(performance.now() - t);
    }
    const [d50, d99, r50, r99] = [
      quantile(direct, 0.5),
      quantile(direct, 0.99),
      quantile(routed, 0.5),
      quantile(routed, 0.99),
    ];
    console.log('\n(a) point query by id, 10k rows, 2000 interleaved runs');
    console.log(`  direct node: p50 ${ms(d50)}  p99 ${ms(d99)}`);
    console.log(`  via router:  p50 ${ms(r50)}  p99 ${ms(r99)}`);
    console.log(
      `  ratio router / direct: p50 ${(r50 / d50).toFixed(2)}x (+${ms(r50 - d50)}), p99 ${(r99 / d99).toFixed(2)}x (+${ms(r99 - d99)})`,
    );
    lines.push(
      `| (a) point query, router over one node vs direct (2000 runs) | ${ms(d50)} | ${ms(r50)} | ${(r50 / d50).toFixed(2)}x (+${ms(r50 - d50)}) | ${ms(d99)} | ${ms(r99)} | ${(r99 / d99).toFixed(2)}x (+${ms(r99 - d99)}) |`,
    );
  }

  if (which.includes('b')) {
    const slow = await startDelayProxy(n2, 0.1, 100);
    const on = await startRouter([n1, slow], ['--hedge', 'on']);
    const off = await startRouter([n1, slow], ['--hedge', 'off']);
    for (let i = 0; i < 200; i++) {
      await point(on, i);
      await point(off, i);
    }
    const tOn = [];
    const tOff = [];
    for (let i = 0; i < 2000; i++) {
      let t = performance.now();
      await point(off, i);
      tOff.push(performance.now() - t);
      t = performance.now();
      await point(on, i);
      tOn.push(performance.now() - t);
    }
    const metrics = await (await fetch(`${on}/metrics`)).text();
    const sent = /board_router_hedges_sent_total (\d+)/.exec(metrics)?.[1];
    const won = /board_router_hedges_won_total (\d+)/.exec(metrics)?.[1];
    const [f50, f99, o50, o99] = [
      quantile(tOff, 0.5),
      quantile(tOff, 0.99),
      quantile(tOn, 0.5),
      quantile(tOn, 0.99),
    ];
    console.log(
      '\n(b) one of two nodes delays 10% of its requests by 100 ms; 2000 interleaved point queries',
    );
    console.log(`  hedging off: p50 ${ms(f50)}  p99 ${ms(f99)}`);
    console.log(
      `  hedging on:  p50 ${ms(o50)}  p99 ${ms(o99)}  (hedges sent ${sent}, won ${won}, of 2200 requests)`,
    );
    console.log(`  ratio p99 off / on = ${(f99 / o99).toFixed(2)}x`);
    lines.push(
      `| (b) p99 with one slow node, hedging off vs on (2000 runs; hedges sent ${sent}, won ${won} of 2200 requests) | ${ms(f50)} | ${ms(o50)} | | ${ms(f99)} | ${ms(o99)} | ${(f99 / o99).toFixed(2)}x better |`,
    );
  }
  if (which.includes('c')) {
    const n3 = await startNode(url, 'bench-3');
    const late = await startDelayProxy(n3, 1, 200);
    const flaky = await startDelayProxy(n2, 0.1, 100);
    const runs = 1000;
    const contenders = {
      'three nodes, one 200 ms late: latency-aware (default, hedging on)': await startRouter([n1, n2, late]),
      'three nodes, one 200 ms late: round robin, hedging on': await startRouter(
        [n1, n2, late],
        ['--balance', 'round-robin'],
      ),
      'three nodes, one 200 ms late: round robin, hedging off': await startRouter(
        [n1, n2, late],
        ['--balance', 'round-robin', '--hedge', 'off'],
      ),
      'two nodes, one 100 ms late on 10%: latency-aware (default, hedging on)': await startRouter([
        n1,
        flaky,
      ]),
      'two nodes, one 100 ms late on 10%: round robin, hedging on': await startRouter(
        [n1, flaky],
        ['--balance', 'round-robin'],
      ),
    };
    const times = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
    for (let i = 0; i < 100; i++) for (const r of Object.values(contenders)) await point(r, i);
    for (let i = 0; i < runs; i++) {
      for (const [k, r] of Object.entries(contenders)) {
        const t = performance.now();
        await point(r, i);
        times[k].push(performance.now() - t);
      }
    }
    console.log(`\n(c) balancing, ${runs} interleaved sequential point queries per router`);
    for (const [k, ts] of Object.entries(times)) {
      console.log(`  ${k}: p50 ${ms(quantile(ts, 0.5))}  p99 ${ms(quantile(ts, 0.99))}`);
      lines.push(`| (c) ${k} | ${ms(quantile(ts, 0.5))} | ${ms(quantile(ts, 0.99))} |`);
    }
  }
  console.log('\nRESULTS.md rows:');
  for (const l of lines) console.log(l);
}

try {
  await main();
} finally {
  await cleanups.run();
}
