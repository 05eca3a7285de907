// Board client benchmarks, measured side by side in one run against one board-node (embedded
// store, auth off, loopback):
//   a) client overhead per query: `board.query()` vs a bare `fetch` of the same `query.execute`
//      RPC (JSON body, JSON.parse of the answer), point query by id on a 100k-row board,
//      interleaved request by request; median and ratio.
//   b) rows/s decoded for a 100k-row result (`SELECT * FROM {{items}}`, 5 columns): bare fetch +
//      JSON.parse, `board.query()` (columnar rows), and the builder's `selectAll().execute()`
//      (rows mapped to objects); median of runs.
//   c) decode only: the same 100k-row answer served from memory by an injected fetch, so only
//      the client's work is timed (JSON.parse, Result, row objects), vs a bare JSON.parse.
// Usage: node bench/board-client.mjs   (needs `npm run build` and `npm run build -w @board/client`).
import { execFile as execFileCb } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect } from '@board/client';
import { NODE_BIN as BIN, cleanups, spawnListening } from './lib/board.mjs';

const execFile = promisify(execFileCb);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const dir = await mkdtemp(join(tmpdir(), 'board-client-bench-'));
await chmod(dir, 0o755);
const env = { PATH: process.env.PATH, BOARD_DATA_DIR: dir, BOARD_LOG_LEVEL: 'warn', BOARD_AUTH: 'off' };
cleanups.add(() => rm(dir, { recursive: true, force: true }));
try {
  await execFile(
    process.execPath,
    [BIN, 'board', 'create', 'bench', '--column', 'grp:INTEGER', '--column', 'val:DOUBLE'],
    {
      env,
    },
  );
  const { base: url } = await spawnListening(BIN, [], { ...env, BOARD_PORT: '0' });
  const board = connect({ url }).board('bench');
  const N = 100_000;
  for (let b = 0; b < N; b += 10_000) {
    const rows = [];
    for (let i = b; i < b + 10_000; i++)
      rows.push({ id: `r${i}`, state: i % 3 === 0 ? 'open' : 'done', grp: i % 100, val: i / 7 });
    const r = await board.insertMany(rows);
    if (!r.ok) throw r.error;
  }

  // a) overhead per query
  const sql = 'SELECT * FROM {{items}} WHERE id = $1';
  const bare = async (id) => {
    const res = await fetch(`${url}/rpc/query.execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-data-board': 'bench' },
      body: JSON.stringify({ sql, tables: [{ token: 'items', entity: 'items' }], params: [id] }),
    });
    const body = JSON.parse(await res.text());
    if (body.status !== 'ok') throw new Error(JSON.stringify(body));
    return body.value;
  };
  const viaClient = async (id) => {
    const r = await board.query(sql, { params: [id] });
    if (!r.ok) throw r.error;
    return r.value;
  };
  for (let i = 0; i < 50; i++) {
    await bare(`r${i}`);
    await viaClient(`r${i}`);
  }
  const tBare = [];
  const tClient = [];
  for (let i = 0; i < 400; i++) {
    const id = `r${(i * 7919) % N}`;
    let t = performance.now();
    await bare(id);
    tBare.push(performance.now() - t);
    t = performance.now();
    await viaClient(id);
    tClient.push(performance.now() - t);
  }
  const a = { bare: median(tBare), client: median(tClient) };

  // b) rows/s decoded
  const all = 'SELECT * FROM {{items}}';
  const bareAll = async () => {
    const res = await fetch(`${url}/rpc/query.execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-data-board': 'bench' },
      body: JSON.stringify({ sql: all, tables: [{ token: 'items', entity: 'items' }] }),
    });
    return JSON.parse(await res.text()).value.result.rows.length;
  };
  const clientAll = async () => {
    const r = await board.query(all);
    if (!r.ok) throw r.error;
    return r.value.result.rows.length;
  };
  const builderAll = async () => (await board.selectAll().execute()).length;
  const runs = { bare: [], client: [], builder: [] };
  await bareAll();
  for (let i = 0; i < 7; i++) {
    for (const [k, f] of [
      ['bare', bareAll],
      ['client', clientAll],
      ['builder', builderAll],
    ]) {
      const t = performance.now();
      const n = await f();
      if (n !== N) throw new Error(`${k}: ${n} rows`);
      runs[k].push(performance.now() - t);
    }
  }
  const b = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));

  // c) decode only: the 100k-row answer served from memory by an injected fetch, so the time is
  // the client's own work (JSON.parse, Result, object mapping) without the node.
  const res = await fetch(`${url}/rpc/query.execute`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-data-board': 'bench' },
    body: JSON.stringify({ sql: all, tables: [{ token: 'items', entity: 'items' }] }),
  });
  const text = await res.text();
  const health = JSON.stringify({ ok: true, nodeId: 'bench' });
  const memFetch = async (input) =>
    new Response(String(input).endsWith('/health') ? health : text, {
      headers: { 'content-type': 'application/json' },
    });
  const mem = connect({ url, fetch: memFetch }).board('bench');
  const dec = { parse: [], query: [], builder: [] };
  for (let i = 0; i < 7; i++) {
    let t = performance.now();
    if (JSON.parse(text).value.result.rows.length !== N) throw new Error('parse');
    dec.parse.push(performance.now() - t);
    t = performance.now();
    const q = await mem.query(all);
    if (!q.ok || q.value.result.rows.length !== N) throw new Error('query');
    dec.query.push(performance.now() - t);
    t = performance.now();
    if ((await mem.selectAll().execute()).length !== N) throw new Error('builder');
    dec.builder.push(performance.now() - t);
  }
  const c = Object.fromEntries(Object.entries(dec).map(([k, v]) => [k, median(v)]));
  const rps = (msv) => Math.round(N / (msv / 1000)).toLocaleString('en-US');
  console.log(`node ${process.version}, ${new Date().toISOString()}`);
  console.log('| benchmark | bare fetch | client | ratio client / bare |');
  console.log('| --- | ---: | ---: | ---: |');
  console.log(
    `| (a) point query by id, 100k-row board (400 queries, median) | ${a.bare.toFixed(2)} ms | ${a.client.toFixed(2)} ms | ${(a.client / a.bare).toFixed(2)}x |`,
  );
  console.log(
    `| (b) 100k-row result, query() (7 runs, median) | ${b.bare.toFixed(0)} ms (${rps(b.bare)} rows/s) | ${b.client.toFixed(0)} ms (${rps(b.client)} rows/s) | ${(b.client / b.bare).toFixed(2)}x |`,
  );
  console.log(
    `| (b) 100k-row result, selectAll().execute() to objects | ${b.bare.toFixed(0)} ms | ${b.builder.toFixed(0)} ms (${rps(b.builder)} rows/s) | ${(b.builder / b.bare).toFixed(2)}x |`,
  );
  console.log(
    `| (c) decode only, 100k rows from memory: query() vs JSON.parse | ${c.parse.toFixed(0)} ms (${rps(c.parse)} rows/s) | ${c.query.toFixed(0)} ms (${rps(c.query)} rows/s) | ${(c.query / c.parse).toFixed(2)}x |`,
  );
  console.log(
    `| (c) decode only, selectAll().execute() to objects vs JSON.parse | ${c.parse.toFixed(0)} ms | ${c.builder.toFixed(0)} ms (${rps(c.builder)} rows/s) | ${(c.builder / c.parse).toFixed(2)}x |`,
  );
} finally {
  await cleanups.run();
}
