// What the board benches (board.mjs, read-variants.mjs, router.mjs, watchers.mjs) share: a
// PostgreSQL 15 server, board-node / plain-endpoint / router child processes found by their
// "listening on <url>" line, JSON-RPC calls, closed-loop load and quantiles. Everything started is
// registered in `cleanups`; a bench calls `cleanups.run()` at the end (last started, first stopped).
import { execFile as execFileCb, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { TestPostgres } from '@support/pg/test-server';

const execFile = promisify(execFileCb);
export const ROOT = resolve(import.meta.dirname, '../..');
/** The board-node under test: BOARD_BENCH_BIN (e.g. another build's, for before/after) or this one. */
export const NODE_BIN = process.env.BOARD_BENCH_BIN ?? join(ROOT, 'packages/board-server/bin/board-node.js');
export const PLAIN_BIN = join(ROOT, 'bench/plain-endpoint.mjs');

/** What to stop and remove at the end, in reverse order of start. */
export const cleanups = {
  list: [],
  add(fn) {
    this.list.push(fn);
  },
  async run() {
    for (const fn of this.list.splice(0).reverse()) await fn().catch(() => {});
  },
};

export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

/** A PostgreSQL 15 server on a free loopback port (durable, as in production); returns its URL. */
export async function startPostgres(settings = {}) {
  const server = await TestPostgres.start({ fsync: 'on', max_connections: '200', ...settings });
  cleanups.add(() => server.destroy());
  return server.url();
}

/**
 * Spawns `node <nodeArgs> <bin> <args>` and waits for its "listening on <url>" line; stopped (and
 * `dir` removed) by `cleanups`. Returns the URL and the pid.
 */
export async function spawnListening(bin, args, env, { nodeArgs = [], dir } = {}) {
  const proc = spawn(process.execPath, [...nodeArgs, bin, ...args], {
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
    proc.once('exit', (c) => rej(new Error(`${bin} exited ${c}`)));
  });
  cleanups.add(async () => {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return { base, pid: proc.pid };
}

/**
 * A board-node on `url` (auth off, its own data dir), with the node flags of BENCH_NODE_ARGS (e.g.
 * '--cpu-prof --cpu-prof-dir=/tmp/prof'). Returns `{ base, pid }`.
 */
export async function startBoardNode(url, { bin = NODE_BIN, id = 'bench', env = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'board-bench-node-'));
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return await spawnListening(
    bin,
    [],
    {
      DATABASE_URL: url,
      BOARD_DATA_DIR: dir,
      BOARD_PORT: '0',
      BOARD_AUTH: 'off',
      BOARD_NODE_ID: id,
      BOARD_LOG_LEVEL: 'warn',
      ...env,
    },
    { nodeArgs, dir },
  );
}

/** The plain node:http + pg endpoint (bench/plain-endpoint.mjs) on `url`. Returns `{ base, pid }`. */
export async function startPlain(url) {
  return await spawnListening(PLAIN_BIN, [], { DATABASE_URL: url });
}

/** Runs a board-node operator command (`board create ...`) against `url`. */
export async function boardCli(args, url, bin = NODE_BIN) {
  await execFile(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, DATABASE_URL: url, BOARD_DATA_DIR: tmpdir(), BOARD_LOG_LEVEL: 'warn' },
  });
}

async function call(base, procedure, headers, body) {
  const res = await fetch(`${base}/rpc/${procedure}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const env = await res.json();
  if (env.status !== 'ok') throw new Error(`${procedure}: ${JSON.stringify(env.error)}`);
  return env.value;
}

/** `POST /rpc/<procedure>` on board `board`; the value, or throws with the error envelope. */
export const rpc = (base, board, procedure, body) => call(base, procedure, { 'x-data-board': board }, body);

/** The same call on the plain endpoint, against Postgres table `table`. */
export const plainRpc = (base, table, procedure, body) =>
  call(base, procedure, { 'x-plain-table': table }, body);

/** `inFlight` workers issuing `fn(i)` back to back for `seconds`: throughput and latencies. */
export async function closedLoop(inFlight, seconds, fn) {
  const lat = [];
  const end = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await fn(n++);
        lat.push(performance.now() - t);
      }
    }),
  );
  return { rps: lat.length / seconds, lat };
}
