import { type IncomingHttpHeaders, request } from 'node:http';
import type { UpstreamNode } from './nodes.js';

/** What one attempt against one node came to. */
export type AttemptOutcome =
  | { kind: 'answer'; status: number; headers: IncomingHttpHeaders; body: Buffer; ms: number }
  /** `sent: false` only when the connection was refused: the node never saw the request. */
  | { kind: 'failed'; reason: string; sent: boolean };

/** Hop-by-hop headers, never forwarded in either direction (plus length, which is recomputed). */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
]);

/** Request headers to send upstream: the client's, untouched, minus hop-by-hop ones. */
export function upstreamHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  }
  return out;
}

/** A started attempt: its outcome, and a way to cancel it (the outcome then never settles usefully). */
export interface Attempt {
  node: UpstreamNode;
  hedge: boolean;
  outcome: Promise<AttemptOutcome>;
  cancel(): void;
}

/** Sends one buffered `POST` to one node and buffers its answer. */
export function startAttempt(
  node: UpstreamNode,
  agent: import('node:http').Agent,
  path: string,
  headers: Record<string, string | string[]>,
  body: Buffer,
  hedge: boolean,
): Attempt {
  const t0 = performance.now();
  let cancelled = false;
  let req: ReturnType<typeof request> | undefined;
  const outcome = new Promise<AttemptOutcome>((resolve) => {
    let connected = false;
    req = request(
      {
        host: node.host,
        port: node.port,
        path,
        method: 'POST',
        agent,
        headers: { ...headers, 'content-length': String(body.length) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            kind: 'answer',
            status: res.statusCode ?? 502,
            headers: res.headers,
            body: Buffer.concat(chunks),
            ms: performance.now() - t0,
          }),
        );
        res.on('error', (e) => resolve({ kind: 'failed', reason: e.message, sent: true }));
        res.on('aborted', () => resolve({ kind: 'failed', reason: 'answer aborted', sent: true }));
      },
    );
    req.on('socket', (s) => {
      if (!s.connecting) connected = true;
      else s.once('connect', () => (connected = true));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      const sent = !(e.code === 'ECONNREFUSED' && !connected);
      resolve({
        kind: 'failed',
        reason: cancelled ? 'cancelled' : `${e.code ?? ''} ${e.message}`.trim(),
        sent,
      });
    });
    req.end(body);
  });
  return {
    node,
    hedge,
    outcome,
    cancel() {
      cancelled = true;
      req?.destroy();
    },
  };
}
