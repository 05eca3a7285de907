import { type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import { fail, HEADERS, type Health, LIVE_PROCEDURE } from '@board/protocol';
import { closeServer, createHttpServer, endStream, listen, UNMATCHED_ROUTE } from '@support/server';
import type { RouterConfig } from './config.js';
import { routerError } from './errors.js';
import { upstreamHeaders } from './forward.js';
import { HedgeBudget, LatencyWindow } from './latency.js';
import { proxyLive } from './live.js';
import { createLogger, type Logger } from './log.js';
import { createMetrics, type Metrics } from './metrics.js';
import { NodePool, type UpstreamNode } from './nodes.js';
import { responseHeaders, routeRpc } from './route.js';
import { BOARD_ROUTER_VERSION } from './version.js';

/** How long a client's ended `/watch` stream may take to read what is still queued for it (as a node's). */
const WATCH_END_GRACE_MS = 30_000;

/** Largest request body the router buffers (bodies are kept for failover and hedging). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** How long the rest of a refused body is read and dropped before the connection is cut. */
const DRAIN_MS = 10_000;

/** A running router. */
export interface BoardRouter {
  url: string;
  metrics: Metrics;
  pool: NodePool;
  /** Stops probing, closes the listener and every open connection. */
  stop(): Promise<void>;
}

/**
 * Starts a router: probes every node once, then listens. node:http (not Hono) because this is the
 * measured hot path: the body and answer are relayed as buffers without re-parsing.
 */
export async function startBoardRouter(config: RouterConfig, logger?: Logger): Promise<BoardRouter> {
  const log = logger ?? createLogger(config.logLevel, { service: 'board-router' });
  const metrics = createMetrics();
  const pool = new NodePool(config.nodes, {
    intervalMs: config.healthIntervalMs,
    timeoutMs: config.healthTimeoutMs,
    balance: config.balance,
    log,
    metrics,
  });
  const ctx = {
    config,
    pool,
    metrics,
    log,
    latency: new LatencyWindow(config.hedgeWindow, config.hedgePercentile),
    budget: new HedgeBudget(config.hedgeBudget, config.hedgeBurst),
  };
  await pool.run();

  // Parser refusals and unservable requests (no Host, `Host: a b`, `OPTIONS *`) get the nodes'
  // envelope with `InvalidInput`, as a node would answer: a client cannot tell the two apart.
  const server: Server = createHttpServer(
    (req, res) => {
      const started = performance.now();
      res.once('close', () =>
        metrics.http.observe(
          routeTemplate(req),
          req.method ?? '',
          res.statusCode,
          (performance.now() - started) / 1000,
        ),
      );
      handle(req, res).catch((err: unknown) => {
        log.error({ err }, 'unexpected router failure');
        if (!res.headersSent) sendError(res, 'NoNodeAvailable', 'internal router failure');
        else res.destroy();
      });
    },
    { envelope: (message) => fail('InvalidInput', `board-router: ${message}`) },
  );
  server.keepAliveTimeout = 65_000;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const pathname = q >= 0 ? url.slice(0, q) : url;
    if (req.method === 'POST' && pathname.startsWith('/rpc/')) {
      const procedure = pathname.slice('/rpc/'.length);
      const body = await readBody(req);
      if (body === 'too-large') return refuseBody(req, res);
      if (body === undefined) {
        sendError(res, 'InvalidInput', 'request body cut off');
        return;
      }
      const gone = new AbortController();
      res.once('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const t0 = performance.now();
      const answer = await routeRpc(ctx, procedure, url, req.headers, body, gone.signal);
      metrics.requests.inc({ procedure: metricProcedure(procedure), outcome: answer.outcome });
      if (answer.outcome !== 'answered') {
        log.warn(
          { procedure, outcome: answer.outcome, ms: performance.now() - t0 },
          'request not answered by a node',
        );
      } else {
        log.debug(
          { procedure, servedBy: answer.headers[HEADERS.servedBy], hedged: answer.headers[HEADERS.hedged] },
          'routed',
        );
      }
      if (res.destroyed) return;
      res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
      res.end(answer.body);
      return;
    }
    if (req.method === 'GET' && pathname === '/watch') return watch(req, res, url);
    if (req.method === 'POST' && pathname === LIVE_PROCEDURE.path) {
      const body = await readBody(req);
      if (body === 'too-large') return refuseBody(req, res);
      if (body === undefined) {
        sendError(res, 'InvalidInput', 'request body cut off');
        return;
      }
      return proxyLive(ctx, req, res, body);
    }
    if (req.method === 'GET' && pathname === '/health') {
      const up = pool.nodes.filter((n) => n.state === 'up').length;
      const health = {
        ok: up > 0,
        nodeId: 'board-router',
        version: BOARD_ROUTER_VERSION,
        nodes: pool.nodes.map((n) => ({ url: n.url, nodeId: n.id, state: n.state })),
      } satisfies Health;
      // A 503 carries the error envelope too (spec, "Errors": every non-200 does), beside the nodes.
      const body = JSON.stringify(
        up > 0
          ? health
          : {
              status: 'error',
              error: { _tag: 'NoNodeAvailable', message: `no node is up (${pool.nodes.length} configured)` },
              ...health,
            },
      );
      res.writeHead(up > 0 ? 200 : 503, { 'content-type': 'application/json' });
      res.end(body);
      return;
    }
    if (req.method === 'GET' && pathname === '/metrics') {
      const text = await metrics.registry.metrics();
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(text);
      return;
    }
    req.resume();
    sendError(res, 'NotFound', `${req.method} ${pathname} is not served`);
  }

  /**
   * Proxies `GET /watch` from one up node, streamed. A node that cannot be reached, or sends no
   * answer within the request deadline, is ejected and the next one tried (a watch is a read); once the stream is relayed, the
   * node dying breaks off the client's stream (the client resumes from its last watermark), and the
   * client going away ends the node's. The node's stream is read only as fast as the client reads
   * (paused while the client's socket is full), so a client that stops reading is cut off by the
   * node's `SlowConsumer` limit as it would be on the node itself.
   */
  function watch(req: IncomingMessage, res: ServerResponse, url: string): void {
    const tried = new Set<UpstreamNode>();
    const headers = upstreamHeaders(req.headers);
    let clientGone = false;
    let current: ReturnType<typeof request> | undefined;
    res.once('close', () => {
      clientGone = true;
      current?.destroy();
    });
    const attempt = (): void => {
      const node = pool.pick(tried);
      if (!node) {
        metrics.requests.inc({ procedure: 'watch', outcome: 'NoNodeAvailable' });
        sendError(
          res,
          'NoNodeAvailable',
          tried.size ? `no node could answer (${tried.size} tried)` : 'no node is up',
        );
        return;
      }
      tried.add(node);
      let answered = false;
      // A node that accepts the stream but sends no answer within the request deadline is
      // treated like one that cannot be reached: ejected, and the next node tried.
      const deadline = setTimeout(
        () => up.destroy(new Error(`no answer within ${config.requestTimeoutMs} ms`)),
        config.requestTimeoutMs,
      );
      const up = request(
        // A connection of its own (agent: false): long-lived streams must not take sockets from
        // the keep-alive pool that routed requests queue on.
        { host: node.host, port: node.port, path: url, method: 'GET', agent: false, headers },
        (ures) => {
          answered = true;
          clearTimeout(deadline);
          metrics.requests.inc({ procedure: 'watch', outcome: 'answered' });
          res.writeHead(ures.statusCode ?? 502, {
            ...responseHeaders(ures.headers),
            [HEADERS.servedBy]: node.id,
            [HEADERS.hedged]: 'false',
          });
          res.flushHeaders();
          // Backpressure: while the client's socket holds more than its high-water mark unsent, the
          // node's stream is not read either, so the node's own buffer limit (`SlowConsumer`)
          // applies to a client that stops reading, and the router holds at most about one chunk
          // beyond that mark per stream.
          ures.on('data', (c: Buffer) => {
            if (!res.write(c)) ures.pause();
          });
          res.on('drain', () => ures.resume());
          // The node's side ended cleanly (its last chunk came: token expiry, node stopping, an
          // `error` event): the client's stream ends after what is queued for it, and is destroyed
          // if the client does not read that within the same grace. The node's side broke off
          // without its last chunk (node killed or gone, or a cut-off client that did not read its
          // rest within the node's grace): the client's stream is broken off too, so that it also
          // ends without a last chunk and the client tells it from a clean end and resumes
          // (through the router, which then picks a live node), as it would talking to the node.
          const endClient = () => {
            if (ures.complete) endStream(res, WATCH_END_GRACE_MS);
            else res.destroy();
          };
          ures.on('end', endClient);
          ures.on('aborted', endClient);
          ures.on('error', endClient);
          ures.on('close', endClient);
        },
      );
      current = up;
      up.on('error', (e) => {
        clearTimeout(deadline);
        if (clientGone) return;
        if (answered) {
          // Broken off mid-stream: break the client's off too (see endClient).
          if (!res.writableEnded) res.destroy();
          return;
        }
        pool.markDown(node, e.message);
        metrics.failovers.inc();
        log.warn({ node: node.url, reason: e.message }, 'watch failover');
        attempt();
      });
      up.end();
    };
    attempt();
  }

  let port: number;
  try {
    port = await listen(server, config.port, config.host);
  } catch (err) {
    await pool.stop();
    throw err;
  }
  const url = `http://${config.host}:${port}`;
  log.info(
    { url, nodes: config.nodes, hedge: config.hedge, version: BOARD_ROUTER_VERSION },
    'board-router listening',
  );
  return {
    url,
    metrics,
    pool,
    async stop() {
      await pool.stop();
      await closeServer(server);
    },
  };
}

function sendError(res: ServerResponse, tag: Parameters<typeof routerError>[0], message: string): void {
  const e = routerError(tag, message);
  res.writeHead(e.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(e.body),
  });
  res.end(e.body);
}

/**
 * Reads the whole request body; `too-large` beyond {@link MAX_BODY_BYTES} (declared or sent; the
 * rest is left unread), undefined when the client aborted.
 */
function readBody(req: IncomingMessage): Promise<Buffer | 'too-large' | undefined> {
  if (Number(req.headers['content-length']) > MAX_BODY_BYTES) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        req.off('data', onData);
        chunks.length = 0;
        resolve('too-large');
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(undefined));
  });
}

/**
 * Answers a body over the limit with `InvalidInput` (a node answers a body it refuses the same
 * way) and closes the connection. The answer is sent at once; the connection is closed once the
 * client has finished sending (what it still sends is read and dropped, up to another
 * {@link MAX_BODY_BYTES}), because closing on a client that is still writing resets the
 * connection, and a reset can destroy the answer before the client reads it.
 */
function refuseBody(req: IncomingMessage, res: ServerResponse): void {
  const e = routerError('InvalidInput', `request body over ${MAX_BODY_BYTES / 1024 / 1024} MiB`);
  res.writeHead(e.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(e.body),
    connection: 'close',
  });
  res.write(e.body);
  let ended = false;
  const finish = () => {
    if (ended) return;
    ended = true;
    res.end();
  };
  if (req.readableEnded) {
    finish();
    return;
  }
  let dropped = 0;
  req.on('data', (c: Buffer) => {
    dropped += c.length;
    if (dropped > MAX_BODY_BYTES) {
      finish();
      req.destroy();
    }
  });
  req.once('end', finish);
  req.once('error', finish);
  req.once('close', finish);
  // A client that declared a huge body and then stalls is not waited for.
  setTimeout(() => {
    finish();
    req.destroy();
  }, DRAIN_MS).unref();
  req.resume();
}

/** The route template of a request, for the HTTP metrics (never the raw path). */
function routeTemplate(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const pathname = url.split('?')[0] ?? url;
  if (req.method === 'POST' && pathname.startsWith('/rpc/')) return '/rpc/:procedure';
  if (req.method === 'GET' && ['/watch', '/health', '/metrics'].includes(pathname)) return pathname;
  if (req.method === 'POST' && pathname === LIVE_PROCEDURE.path) return pathname;
  return UNMATCHED_ROUTE;
}

/** Procedure label for metrics: contract names as they are, anything else as `other` (bounded cardinality). */
function metricProcedure(p: string): string {
  return /^(query\.execute|mutate\.(insert|update|delete)|changes\.read|node\.stats)$/.test(p) ? p : 'other';
}
