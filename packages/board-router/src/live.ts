import { type IncomingMessage, request, type ServerResponse } from 'node:http';
import { HEADERS, LIVE_PROCEDURE } from '@board/protocol';
import { endStream } from '@support/server';
import type { RouterConfig } from './config.js';
import { routerError } from './errors.js';
import { upstreamHeaders } from './forward.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NodePool, UpstreamNode } from './nodes.js';
import { responseHeaders } from './route.js';

/** How long a client's ended live stream may take to read what is still queued for it. */
const END_GRACE_MS = 30_000;
const BLANK_LINE = Buffer.from('\n\n');

/**
 * Proxies `POST /live` (a live query, server-sent events) from one up node, and moves it to
 * another node when that node fails or stops, without the client noticing more than a whole result.
 *
 *   pick an up node (none: 503 NoNodeAvailable) ──▶ connecting ──non-200──▶ relayed as it came
 *     connecting ──no answer within the request deadline / refused──▶ node ejected, next node
 *     connecting ──200──▶ relaying: the node's events are forwarded whole (never half an event),
 *       the `id` of the last one kept (its watermark)
 *     relaying ──an `error` event, then the node's clean end──▶ the client's stream ends after it
 *     relaying ──the node's stream breaks off (node died) or ends without an `error` (node
 *       stopping)──▶ MOVE: the same body to another up node with `Last-Event-ID: <last id>`;
 *       its first event is the whole result at or past that watermark, relayed on the same
 *       client stream (a non-200 answer becomes an `error` event)
 *     MOVE with no node left ──▶ `error {NoNodeAvailable}` (the client library resumes later)
 *
 * Read at the client's pace, as `/watch` is: while the client's socket is full the node's stream
 * is paused, so the node's own `SlowConsumer` limit applies to a client that stops reading.
 */
export function proxyLive(
  ctx: { config: RouterConfig; pool: NodePool; metrics: Metrics; log: Logger },
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
): void {
  const { config, pool, metrics, log } = ctx;
  const headers = upstreamHeaders(req.headers);
  let lastId = typeof req.headers['last-event-id'] === 'string' ? req.headers['last-event-id'] : undefined;
  let current: ReturnType<typeof request> | undefined;
  let clientGone = false;
  let tried = new Set<UpstreamNode>();
  /** Moves since the last event relayed: past one per node, no node can keep the stream. */
  let moves = 0;
  res.once('close', () => {
    clientGone = true;
    current?.destroy();
  });

  /** Ends the client's stream with an `error` event (once it has started) or answers the error. */
  const fail = (tag: 'NoNodeAvailable', message: string) => {
    metrics.requests.inc({ procedure: LIVE_PROCEDURE.name, outcome: tag });
    if (!res.headersSent) {
      const e = routerError(tag, message);
      res.writeHead(e.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(e.body),
      });
      res.end(e.body);
      return;
    }
    errorEvent(tag, `board-router: ${message}`);
  };
  const errorEvent = (tag: string, message: string) => {
    if (res.writableEnded) return;
    res.write(`event: error\ndata: ${JSON.stringify({ _tag: tag, message })}\n\n`);
    endStream(res, END_GRACE_MS);
  };

  const move = (from: UpstreamNode, reason: string) => {
    if (clientGone || res.writableEnded) return;
    if (++moves > config.nodes.length) {
      fail('NoNodeAvailable', `no node kept the live query (${moves - 1} moves without an event)`);
      return;
    }
    metrics.failovers.inc();
    log.warn({ node: from.url, reason, lastId }, 'live query moved to another node');
    attempt();
  };

  const attempt = (): void => {
    const node = pool.pick(tried);
    if (!node) {
      fail(
        'NoNodeAvailable',
        tried.size ? `no node could take the live query (${tried.size} tried)` : 'no node is up',
      );
      return;
    }
    tried.add(node);
    let answered = false;
    const deadline = setTimeout(
      () => up.destroy(new Error(`no answer within ${config.requestTimeoutMs} ms`)),
      config.requestTimeoutMs,
    );
    const upHeaders: Record<string, string | string[]> = {
      ...headers,
      'content-length': String(body.length),
    };
    if (lastId !== undefined) upHeaders['last-event-id'] = lastId;
    const up = request(
      // A connection of its own: a long-lived stream must not hold a pooled keep-alive socket.
      {
        host: node.host,
        port: node.port,
        path: LIVE_PROCEDURE.path,
        method: 'POST',
        agent: false,
        headers: upHeaders,
      },
      (ures) => {
        answered = true;
        clearTimeout(deadline);
        const status = ures.statusCode ?? 502;
        if (!res.headersSent) {
          metrics.requests.inc({ procedure: LIVE_PROCEDURE.name, outcome: 'answered' });
          res.writeHead(status, {
            ...responseHeaders(ures.headers),
            [HEADERS.servedBy]: node.id,
            [HEADERS.hedged]: 'false',
          });
          if (status !== 200) {
            ures.pipe(res);
            return;
          }
          res.flushHeaders();
        } else if (status !== 200) {
          // A move refused (e.g. the token expired meanwhile): its envelope becomes the stream's end.
          const parts: Buffer[] = [];
          ures.on('data', (c: Buffer) => parts.push(c));
          ures.on('end', () => {
            const text = Buffer.concat(parts).toString('utf8');
            let error: { _tag?: string; message?: string } | undefined;
            try {
              error = (JSON.parse(text) as { error?: { _tag?: string; message?: string } }).error;
            } catch {
              error = undefined;
            }
            errorEvent(error?._tag ?? 'NodeFailed', error?.message ?? `board-router: HTTP ${status}`);
          });
          return;
        }
        // A node that answered gets the next move's pick again (it may be the one that stays up).
        tried = new Set([node]);
        const events = new EventSplitter();
        let sawError = false;
        ures.on('data', (c: Buffer) => {
          for (const ev of events.push(c)) {
            if (ev.id !== undefined) {
              lastId = ev.id;
              moves = 0;
            }
            if (ev.error) sawError = true;
            for (const part of ev.parts) if (!res.write(part)) ures.pause();
          }
        });
        res.on('drain', () => ures.resume());
        let done = false;
        const ended = () => {
          if (done) return;
          done = true;
          if (clientGone) return;
          if (sawError) endStream(res, END_GRACE_MS);
          else {
            if (!ures.complete) pool.markDown(node, 'live stream broken off');
            move(node, ures.complete ? 'the node ended the stream' : 'the stream broke off');
          }
        };
        ures.on('end', ended);
        ures.on('aborted', ended);
        ures.on('error', ended);
        ures.on('close', ended);
      },
    );
    current = up;
    up.on('error', (e) => {
      clearTimeout(deadline);
      if (clientGone || answered) return;
      pool.markDown(node, e.message);
      move(node, e.message);
    });
    up.end(body);
  };
  attempt();
}

/** One whole SSE event (or comment) from a node: its bytes, its `id`, and whether it is an `error`. */
interface SplitEvent {
  parts: Buffer[];
  id: string | undefined;
  error: boolean;
}

/**
 * Cuts a node's event stream into whole events at each blank line, without copying the bytes of
 * an event (a whole result can be megabytes over many chunks): only its first bytes (the `event:`
 * line) and its last ones (the `id:` line, which a node writes last) are looked at.
 */
class EventSplitter {
  #pending: Buffer[] = [];

  push(chunk: Buffer): SplitEvent[] {
    const out: SplitEvent[] = [];
    let start = 0;
    // A blank line split across chunks: the pending bytes end with `\n` and this chunk starts with one.
    const tail = this.#pending.at(-1);
    if (tail && tail[tail.length - 1] === 0x0a && chunk[0] === 0x0a) {
      out.push(this.#event([...this.#pending, chunk.subarray(0, 1)]));
      this.#pending = [];
      start = 1;
    }
    for (let i = chunk.indexOf(BLANK_LINE, start); i >= 0; i = chunk.indexOf(BLANK_LINE, start)) {
      out.push(this.#event([...this.#pending, chunk.subarray(start, i + 2)]));
      this.#pending = [];
      start = i + 2;
    }
    if (start < chunk.length) this.#pending.push(chunk.subarray(start));
    return out;
  }

  #event(parts: Buffer[]): SplitEvent {
    const head = Buffer.concat(parts.slice(0, 2)).subarray(0, 16).toString('latin1');
    let tailBytes = Buffer.alloc(0);
    for (let i = parts.length - 1; i >= 0 && tailBytes.length < 40; i--)
      tailBytes = Buffer.concat([parts[i]!, tailBytes]);
    const id = /\nid: ?(\d{1,15})\n\n$/.exec(tailBytes.subarray(-40).toString('latin1'))?.[1];
    return { parts, id, error: head.startsWith('event: error\n') };
  }
}
