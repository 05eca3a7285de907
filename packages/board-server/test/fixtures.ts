/**
 * Test fixtures: real board-node processes over real PostgreSQL (embedded, or a Debian
 * PostgreSQL 15 server started for the suite), with cleanup that always runs.
 */
import { type ChildProcess, execFile as execFileCb, spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { pgTest, type TestStore } from '@support/pg/testing';

const execFile = promisify(execFileCb);
const ROOT = resolve(import.meta.dirname, '../../..');
const BIN = join(ROOT, 'packages/board-server/bin/board-node.js');
export const TOKEN_SECRET = 'test-secret-test-secret-test-secret-0123456789';

/** The env a node needs for a test store and its own data dir. */
export function nodeEnv(store: TestStore, dataDir: string): Record<string, string> {
  return { ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}), BOARD_DATA_DIR: dataDir };
}

/**
 * `pgTest` (`@support/pg/testing`) plus `startNode`: a board-node process that is stopped when the
 * test file ends, before its data dir and its store go away (file-scoped, usable in `beforeAll`).
 *
 * @example
 * ```ts
 * boardTest.beforeAll(async ({ openStore, tempDir, startNode }) => {
 *   env = nodeEnv(await openStore(store), await tempDir('board-'));
 *   node = await startNode(env);
 * });
 * ```
 */
export const boardTest = pgTest.extend(
  'startNode',
  { scope: 'file' },
  async ({ cleanups }) =>
    async (env: Record<string, string>, args: string[] = []) => {
      const node = await startNode(env, args);
      return cleanups.add(node, () => node.stop());
    },
);

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
    const blocks = new BlockSplitter();
    try {
      for (;;) {
        const { done, value: chunk } = await reader.read();
        if (done) {
          ended = true;
          break;
        }
        for (const block of blocks.push(chunk)) {
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

/**
 * Cuts a stream of text into SSE blocks at each blank line (`\n\n`), in time linear in its length:
 * a large event arrives in many chunks, and searching all the text held so far again at each one
 * took seconds for the multi-megabyte frames of the slow-consumer tests.
 */
class BlockSplitter {
  #pending: string[] = [];
  #pendingEndsWithNewline = false;

  /** The blocks that `chunk` completes, in order. */
  push(chunk: string): string[] {
    const out: string[] = [];
    let rest = chunk;
    if (this.#pendingEndsWithNewline && rest.startsWith('\n')) {
      out.push(this.#pending.join('').slice(0, -1));
      this.#pending = [];
      this.#pendingEndsWithNewline = false;
      rest = rest.slice(1);
    }
    for (let idx = rest.indexOf('\n\n'); idx >= 0; idx = rest.indexOf('\n\n')) {
      this.#pending.push(rest.slice(0, idx));
      out.push(this.#pending.join(''));
      this.#pending = [];
      this.#pendingEndsWithNewline = false;
      rest = rest.slice(idx + 2);
    }
    if (rest !== '') {
      this.#pending.push(rest);
      this.#pendingEndsWithNewline = rest.endsWith('\n');
    }
    return out;
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

/** An event of a live stream (`POST /live`), parsed. */
export interface LiveItem {
  event: string;
  data: unknown;
  id?: string;
}

/**
 * A raw `POST /live` stream on a socket the test controls: `next()` waits for the next event
 * (heartbeats skipped), `cut()` destroys the connection (a client or network gone mid-stream),
 * `pause()`/`resume()` stop and restart reading (a slow client).
 */
export class LiveConnection {
  readonly items: LiveItem[] = [];
  status: number | undefined;
  headers: import('node:http').IncomingHttpHeaders = {};
  /** The answer's body when it was not a stream (status not 200). */
  text = '';
  ended = false;
  #res: import('node:http').IncomingMessage | undefined;
  #req: import('node:http').ClientRequest;
  #read = 0;
  #waiters: (() => void)[] = [];
  readonly #blocks = new BlockSplitter();

  constructor(
    url: string,
    body: unknown,
    options: { board?: string; token?: string; lastEventId?: string; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
    if (options.board !== undefined) headers['x-data-board'] = options.board;
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
    const { hostname, port } = new URL(url);
    this.#req = httpRequest(
      { host: hostname, port: Number(port), path: '/live', method: 'POST', headers, agent: false },
      (res) => {
        this.#res = res;
        this.status = res.statusCode;
        this.headers = res.headers;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (this.status !== 200) this.text += chunk;
          else
            for (const block of this.#blocks.push(chunk)) {
              const item = parseSse(block);
              if (item && 'event' in item) this.items.push(item);
            }
          this.#wake();
        });
        const end = () => {
          this.ended = true;
          this.#wake();
        };
        res.on('end', end);
        res.on('close', end);
        res.on('error', end);
        this.#wake();
      },
    );
    this.#req.on('error', () => {
      this.ended = true;
      this.#wake();
    });
    this.#req.end(typeof body === 'string' ? body : JSON.stringify(body));
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  /** Waits for the response head. */
  async answered(): Promise<number> {
    while (this.status === undefined && !this.ended) await new Promise<void>((r) => this.#waiters.push(r));
    return this.status ?? 0;
  }

  /** The next event not yet taken by `next()`; undefined once the stream ended without one. */
  async next(): Promise<LiveItem | undefined> {
    for (;;) {
      const item = this.items[this.#read];
      if (item) {
        this.#read++;
        return item;
      }
      if (this.ended) return undefined;
      await new Promise<void>((r) => this.#waiters.push(r));
    }
  }

  /** Waits until the stream has ended (events still arrive into `items` meanwhile). */
  async end(): Promise<void> {
    while (!this.ended) await new Promise<void>((r) => this.#waiters.push(r));
  }

  /** Stops reading (the socket's buffers fill up). */
  pause(): void {
    this.#res?.pause();
  }

  /** Reads again. */
  resume(): void {
    this.#res?.resume();
  }

  /** Destroys the connection. */
  cut(): void {
    this.#req.destroy();
    this.#res?.destroy();
  }
}
