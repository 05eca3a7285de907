/**
 * Router test fixtures (`@board/router/testing`; the board-node ones are `@board/server/testing`): an HTTP
 * gate proxy that can hold chosen requests (a node that is slow, or dies mid-request), and the
 * `board-router` binary.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
const BIN = join(ROOT, 'packages/board-router/bin/board-router.js');

/** A request the gate proxy saw. */
export interface Seen {
  path: string;
  body: string;
}

/**
 * An HTTP proxy in front of one node. Requests for which `hold` answers true (and `/watch` requests
 * while `setHoldWatch(true)`) are never forwarded:
 * they stay open (a node that is slow past any deadline) until the client cancels them or
 * `dropHeld()` resets their connections (the node died mid-request).
 */
export interface GateProxy {
  url: string;
  seen: Seen[];
  /** Held requests still open. */
  held(): number;
  /** Held requests the client (the router) cancelled. */
  cancelled(): number;
  /** Decides which `/rpc` requests to hold; `n` counts `/rpc` requests from 1. */
  setHold(fn: (s: Seen, n: number) => boolean): void;
  /** Decides which `/rpc` requests are answered 500 (with an envelope) instead of forwarded. */
  setFail(fn: (s: Seen) => boolean): void;
  /** Whether `GET /watch` requests are held (a node that never answers a stream's headers). */
  setHoldWatch(hold: boolean): void;
  /** Resolves when the next request is held. */
  nextHeld(): Promise<Seen>;
  /** Resets the connections of every held request. */
  dropHeld(): void;
  stop(): Promise<void>;
}

export async function startGateProxy(target: string): Promise<GateProxy> {
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const seen: Seen[] = [];
  const held = new Map<ServerResponse, IncomingMessage>();
  let cancelled = 0;
  let rpcCount = 0;
  let hold: (s: Seen, n: number) => boolean = () => false;
  let failWith500: (s: Seen) => boolean = () => false;
  let holdWatch = false;
  let waiters: ((s: Seen) => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const s = { path: req.url ?? '/', body: body.toString('utf8') };
      const holdIt = () => {
        held.set(res, req);
        res.once('close', () => {
          if (held.delete(res)) cancelled++;
        });
        const w = waiters;
        waiters = [];
        for (const f of w) f(s);
      };
      if (holdWatch && s.path.startsWith('/watch')) {
        holdIt();
        return;
      }
      if (s.path.startsWith('/rpc/')) {
        seen.push(s);
        rpcCount++;
        if (failWith500(s)) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: 'error', error: { _tag: 'Internal', message: 'injected 500' } }));
          return;
        }
        if (hold(s, rpcCount)) {
          holdIt();
          return;
        }
      }
      const headers = { ...req.headers };
      delete headers.host;
      const up = request(
        { host: t.hostname, port: Number(t.port), path: s.path, method: req.method, headers, agent },
        (ures) => {
          res.writeHead(ures.statusCode ?? 502, ures.headers);
          ures.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      res.on('close', () => up.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  const dropHeld = () => {
    const all = [...held.values()];
    held.clear();
    for (const req of all) req.socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    held: () => held.size,
    cancelled: () => cancelled,
    setHold(fn) {
      hold = fn;
      rpcCount = 0;
    },
    setFail(fn) {
      failWith500 = fn;
    },
    setHoldWatch(h) {
      holdWatch = h;
    },
    nextHeld: () => new Promise((r) => waiters.push(r)),
    dropHeld,
    async stop() {
      dropHeld();
      agent.destroy();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}

/** A running `board-router` process. */
export interface RouterProcess {
  url: string;
  proc: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** Spawns the `board-router` binary and waits for its listening line. */
export async function startRouterProcess(
  args: string[],
  env: Record<string, string> = {},
): Promise<RouterProcess> {
  const proc = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BOARD_ROUTER_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += String(d);
  });
  proc.stderr?.on('data', (d) => {
    out += String(d);
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = await new Promise<string>((res, rej) => {
    const check = () => {
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (m?.[1]) res(m[1]);
    };
    proc.stdout?.on('data', check);
    proc.once('exit', (code) => rej(new Error(`board-router exited with ${code}:\n${out}`)));
  });
  return {
    url,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** Runs `board-router` to completion (for --help and configuration errors). */
export async function runRouter(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout?.on('data', (d) => {
    stdout += String(d);
  });
  proc.stderr?.on('data', (d) => {
    stderr += String(d);
  });
  const code = await new Promise<number>((r) => proc.once('exit', (c) => r(c ?? 1)));
  return { code, stdout, stderr };
}

/** Polls `fn` until it returns true (bounded by the test's own timeout, not by a threshold here). */
export async function eventually(fn: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await fn())) await new Promise((r) => setTimeout(r, 20));
}
