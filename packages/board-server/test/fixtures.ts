/**
 * Test fixtures: real board-node processes over real PostgreSQL (embedded, or a Debian
 * PostgreSQL 15 server started for the suite), with cleanup that always runs.
 */
import { type ChildProcess, execFile as execFileCb, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const execFile = promisify(execFileCb);
const ROOT = resolve(import.meta.dirname, '../../..');
const BIN = join(ROOT, 'packages/board-server/bin/board-node.js');
export const PG_BIN = '/usr/lib/postgresql/15/bin';
export const TOKEN_SECRET = 'test-secret-test-secret-test-secret-0123456789';

/** True under CI, where a missing system dependency fails the suite instead of skipping it. */
export const IN_CI = process.env.CI === 'true';

/** Whether the Debian PostgreSQL server binaries are installed. */
export function serverPostgresAvailable(): boolean {
  return existsSync(join(PG_BIN, 'initdb')) && existsSync(join(PG_BIN, 'pg_ctl'));
}

/** A temp directory that the `postgres` user can traverse (the embedded store runs as postgres when we are root). */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await chmod(dir, 0o755);
  return dir;
}

async function freePort(): Promise<number> {
  return await new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

async function postgresIds(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number((await execFile('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await execFile('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

/** A PostgreSQL 15 server on a free loopback TCP port, stopped and removed by `stop()`. */
export interface ServerPostgres {
  url: string;
  /** Stops the server (immediate shutdown) and removes its directory. */
  stop(): Promise<void>;
  /** Stops the server but keeps its data, to simulate an outage. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port. */
  resume(): Promise<void>;
}

/** Starts a PostgreSQL server from the Debian package (as user `postgres` when root). */
export async function startServerPostgres(): Promise<ServerPostgres> {
  if (!serverPostgresAvailable()) {
    throw new Error(`PostgreSQL server binaries missing under ${PG_BIN} (Debian package postgresql-15)`);
  }
  const dir = await tempDir('board-pg-');
  const ids = await postgresIds();
  if (ids) await chown(dir, ids.uid, ids.gid);
  const as = (cmd: string, args: string[]) =>
    ids ? execFile('runuser', ['-u', 'postgres', '--', cmd, ...args]) : execFile(cmd, args);
  const data = join(dir, 'data');
  await as(join(PG_BIN, 'initdb'), [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth=trust',
    '-E',
    'UTF8',
    '--locale=C',
  ]);
  const port = await freePort();
  const start = () =>
    as(join(PG_BIN, 'pg_ctl'), [
      'start',
      '-D',
      data,
      '-w',
      '-l',
      join(dir, 'log'),
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c max_connections=300 -c fsync=off`,
    ]);
  await start();
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    async halt() {
      await as(join(PG_BIN, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w']);
    },
    async resume() {
      await start();
    },
    async stop() {
      await as(join(PG_BIN, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The two stores every integration suite runs against (Kysely's DIALECTS loop). */
export const STORES = ['embedded', 'server'] as const;
export type StoreName = (typeof STORES)[number];

/** A store for one suite: the env a node needs for it, and cleanup. */
export interface StoreFixture {
  name: StoreName;
  /** Env for a node; each node gets its own data dir (`dataDir()`). */
  env(dataDir: string): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Opens a store. `embedded`: nodes share the first data dir handed out (one embedded PostgreSQL);
 * `server`: a PostgreSQL server over TCP that every node reaches through DATABASE_URL.
 */
export async function openStoreFixture(name: StoreName): Promise<StoreFixture> {
  if (name === 'server') {
    const pg = await startServerPostgres();
    return { name, env: () => ({ DATABASE_URL: pg.url }), stop: () => pg.stop() };
  }
  return { name, env: () => ({}), stop: async () => undefined };
}

/** A running board-node process. */
export interface NodeProcess {
  url: string;
  dataDir: string;
  env: Record<string, string>;
  proc: ChildProcess;
  output(): string;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit (the embedded PostgreSQL, if any, keeps running). */
  kill(): Promise<void>;
}

/** Spawns `board-node` and waits for its listening line. */
export async function startNode(env: Record<string, string>, args: string[] = []): Promise<NodeProcess> {
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    BOARD_PORT: '0',
    BOARD_LOG_LEVEL: 'warn',
    BOARD_AUTH: 'off',
    ...env,
  };
  const proc = spawn(process.execPath, [BIN, ...args], { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += String(d);
  });
  proc.stderr?.on('data', (d) => {
    out += String(d);
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`board-node did not start in 60 s:\n${out}`)), 60_000);
    const check = () => {
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        res(m[1]);
      }
    };
    proc.stdout?.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`board-node exited with ${code}:\n${out}`));
    });
  });
  const dataDir = fullEnv.BOARD_DATA_DIR ?? '';
  return {
    url,
    dataDir,
    env: fullEnv,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs the `board-node` CLI to completion. */
export async function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const r = await execFile(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BOARD_LOG_LEVEL: 'warn', ...env },
    });
    return { stdout: r.stdout, stderr: r.stderr, code: 0 };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number };
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: typeof e.code === 'number' ? e.code : 1 };
  }
}

/** Stops an embedded PostgreSQL left running under `dataDir` (e.g. after SIGKILL) and removes the dir. */
export async function removeDataDir(dataDir: string): Promise<void> {
  const pidFile = join(dataDir, 'pg', 'data', 'postmaster.pid');
  try {
    const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
    if (pid > 0) {
      process.kill(pid, 'SIGQUIT');
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(pid, 0);
          await new Promise((r) => setTimeout(r, 50));
        } catch {
          break;
        }
      }
    }
  } catch {
    // no embedded PostgreSQL running there
  }
  await rm(dataDir, { recursive: true, force: true });
}

/** An HTTP answer: status and parsed JSON body (or the raw text when not JSON). */
export interface Answer {
  status: number;
  body: { status: 'ok'; value: unknown } | { status: 'error'; error: { _tag: string; message: string } };
  text: string;
  headers: Headers;
}

/** Calls `POST /rpc/<procedure>`. */
export async function rpc(
  url: string,
  procedure: string,
  body: unknown,
  options: { board?: string; token?: string; headers?: Record<string, string>; raw?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.board !== undefined) headers['x-data-board'] = options.board;
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const res = await fetch(`${url}/rpc/${procedure}`, {
    method: 'POST',
    headers,
    body: options.raw ?? JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Answer['body'];
  try {
    parsed = JSON.parse(text) as Answer['body'];
  } catch {
    parsed = { status: 'error', error: { _tag: '<not json>', message: text } };
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

/** The value of an ok envelope; fails the test with the error otherwise. */
export function value<T = unknown>(a: Answer): T {
  if (a.status !== 200 || a.body.status !== 'ok') {
    throw new Error(`expected ok, got ${a.status} ${a.text}`);
  }
  return a.body.value as T;
}

/** The tag of an error envelope (or "ok"). */
export function tag(a: Answer): string {
  return a.body.status === 'error' ? a.body.error._tag : 'ok';
}

/** A parsed SSE event or comment. */
export type SseItem = { event: string; data: unknown; id?: string } | { comment: string };

/**
 * Opens `GET /watch` and collects items until `until` says stop, the stream ends, or `timeoutMs`.
 */
export async function watch(
  url: string,
  options: {
    board?: string;
    token?: string;
    after?: number;
    timeoutMs?: number;
    until?: (items: SseItem[]) => boolean;
    onItem?: (item: SseItem, at: number) => void;
  },
): Promise<{ status: number; items: SseItem[]; ended: boolean; contentType: string | null; text?: string }> {
  const headers: Record<string, string> = {};
  if (options.board !== undefined) headers['x-data-board'] = options.board;
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), options.timeoutMs ?? 10_000);
  const items: SseItem[] = [];
  let ended = false;
  const q = options.after === undefined ? '' : `?after=${options.after}`;
  try {
    const res = await fetch(`${url}/watch${q}`, { headers, signal: ctl.signal });
    if (res.status !== 200 || !res.body) {
      return {
        status: res.status,
        items,
        ended: true,
        contentType: res.headers.get('content-type'),
        text: await res.text(),
      };
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    try {
      for (;;) {
        const { done, value: chunk } = await reader.read();
        if (done) {
          ended = true;
          break;
        }
        buf += chunk;
        let idx = buf.indexOf('\n\n');
        while (idx >= 0) {
          const block = buf.slice(0, idx);
          buf = buf.slice(idx + 2);
          idx = buf.indexOf('\n\n');
          const item = parseSse(block);
          if (!item) continue;
          items.push(item);
          options.onItem?.(item, performance.now());
          if (options.until?.(items)) {
            ctl.abort();
            return { status: 200, items, ended, contentType: res.headers.get('content-type') };
          }
        }
      }
    } catch (err) {
      if (!ctl.signal.aborted) throw err;
    }
    return { status: 200, items, ended, contentType: res.headers.get('content-type') };
  } finally {
    clearTimeout(timer);
  }
}

function parseSse(block: string): SseItem | undefined {
  const lines = block.split('\n');
  if (lines.every((l) => l.startsWith(':')))
    return { comment: lines.map((l) => l.slice(1).trim()).join('\n') };
  let event = 'message';
  let data = '';
  let id: string | undefined;
  for (const l of lines) {
    if (l.startsWith('event:')) event = l.slice(6).trim();
    else if (l.startsWith('data:')) data += l.slice(5).trim();
    else if (l.startsWith('id:')) id = l.slice(3).trim();
  }
  return { event, data: data === '' ? null : JSON.parse(data), ...(id !== undefined ? { id } : {}) };
}

/** Items that are events (not comments). */
export function events(items: SseItem[]): { event: string; data: unknown; id?: string }[] {
  return items.filter((i): i is { event: string; data: unknown; id?: string } => 'event' in i);
}
