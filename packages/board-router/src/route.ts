import type { IncomingHttpHeaders } from 'node:http';
import { HEADERS, isIdempotentMark, mayRetry } from '@board/protocol';
import type { RouterConfig } from './config.js';
import { routerError } from './errors.js';
import { type Attempt, type AttemptOutcome, startAttempt, upstreamHeaders } from './forward.js';
import type { HedgeBudget, LatencyWindow } from './latency.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NodePool, UpstreamNode } from './nodes.js';

/** What the router answers the client: status, headers, body. */
export interface RoutedAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer | string;
  /** Router error tag, or `answered` when a node's answer is relayed. */
  outcome: string;
}

/**
 * True when a request may be sent more than once: `@board/protocol`'s `mayRetry` (the rule the
 * client uses too), with "keyed" read from `x-data-idempotent` (the router never parses bodies).
 */
export function isRetryable(procedure: string, headers: IncomingHttpHeaders): boolean {
  return mayRetry(procedure, isIdempotentMark(headers[HEADERS.idempotent]));
}

/** Whether an answer counts as the node failing to answer (5xx): eligible requests move on. */
function nodeCouldNotAnswer(o: AttemptOutcome): boolean {
  return o.kind === 'failed' || o.status >= 500;
}

/**
 * Routes one `POST /rpc/<procedure>`.
 *
 * Per-request state machine (hedging and failover):
 *
 *                 pick up node (none: NoNodeAvailable)
 *                        │
 *                        ▼
 *   ┌────────────▶ IN FLIGHT (1..2 attempts) ──deadline──▶ RouterTimeout (all attempts cancelled)
 *   │               │        │            │
 *   │  hedge timer fires,    │            └─ an attempt answers (status < 500) ─▶ WON: cancel the
 *   │  retryable, no hedge   │                                      others, relay the answer
 *   │  sent yet, budget and  │
 *   │  another up node ──────┘ (sends the hedge; at most one per request)
 *   │
 *   │   an attempt fails (transport error or 5xx):
 *   │   - transport error: the node is ejected (down until a probe succeeds)
 *   └── - retryable, or never sent (connection refused): FAILOVER to an untried up node
 *       - otherwise (an unkeyed mutation that reached the wire): NodeFailed, never re-sent
 *       - nothing left in flight and no node to try: relay the last 5xx, else NoNodeAvailable
 *
 * The hedge delay is the configured percentile of recent successful attempt latencies, clamped
 * to [min, max]; before any sample it is the max.
 */
export async function routeRpc(
  ctx: {
    config: RouterConfig;
    pool: NodePool;
    metrics: Metrics;
    latency: LatencyWindow;
    budget: HedgeBudget;
    log: Logger;
  },
  procedure: string,
  path: string,
  reqHeaders: IncomingHttpHeaders,
  body: Buffer,
  clientGone: AbortSignal,
): Promise<RoutedAnswer> {
  const { config, pool, metrics, latency, budget, log } = ctx;
  const retryable = isRetryable(procedure, reqHeaders);
  if (retryable) budget.deposit();
  const headers = upstreamHeaders(reqHeaders);
  const tried = new Set<UpstreamNode>();
  const inFlight = new Set<Attempt>();
  let hedgeSent = false;
  /** The latest 5xx answer and the node that gave it (relayed when no node can do better). */
  let last5xx: { o: AttemptOutcome & { kind: 'answer' }; node: UpstreamNode } | undefined;

  const errorAnswer = (tag: Parameters<typeof routerError>[0], message: string): RoutedAnswer => {
    const e = routerError(tag, message);
    return {
      status: e.status,
      headers: { 'content-type': 'application/json' },
      body: e.body,
      outcome: tag,
    };
  };

  return await new Promise<RoutedAnswer>((resolve) => {
    let settled = false;
    let hedgeTimer: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      settle(errorAnswer('RouterTimeout', `no node answered within ${config.requestTimeoutMs} ms`));
    }, config.requestTimeoutMs);
    const onClientGone = () => settle(errorAnswer('RouterTimeout', 'client went away'));
    clientGone.addEventListener('abort', onClientGone, { once: true });

    function settle(answer: RoutedAnswer): void {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (hedgeTimer) clearTimeout(hedgeTimer);
      clientGone.removeEventListener('abort', onClientGone);
      for (const a of inFlight) a.cancel();
      inFlight.clear();
      resolve(answer);
    }

    function send(node: UpstreamNode, hedge: boolean): void {
      tried.add(node);
      const attempt = startAttempt(node, pool.agent, path, headers, body, hedge);
      const t0 = performance.now();
      pool.started(node);
      void attempt.outcome.then((o) =>
        pool.finished(node, o.kind === 'answer' ? o.ms : performance.now() - t0),
      );
      inFlight.add(attempt);
      void attempt.outcome.then((o) => onOutcome(attempt, o));
    }

    function onOutcome(attempt: Attempt, o: AttemptOutcome): void {
      if (settled) return;
      inFlight.delete(attempt);
      if (o.kind === 'answer') metrics.nodeLatency.observe({ node: attempt.node.url }, o.ms / 1000);
      if (!nodeCouldNotAnswer(o) && o.kind === 'answer') {
        latency.add(o.ms);
        const hedged = hedgeSent && inFlight.size > 0;
        if (attempt.hedge) metrics.hedgesWon.inc();
        settle({
          status: o.status,
          headers: {
            ...responseHeaders(o.headers),
            [HEADERS.servedBy]: attempt.node.id,
            [HEADERS.hedged]: String(hedged || attempt.hedge),
          },
          body: o.body,
          outcome: 'answered',
        });
        return;
      }
      // The attempt failed: transport error or 5xx.
      if (o.kind === 'failed') pool.markDown(attempt.node, o.reason);
      else last5xx = { o, node: attempt.node };
      log.warn(
        {
          procedure,
          node: attempt.node.url,
          reason: o.kind === 'failed' ? o.reason : `HTTP ${o.status}`,
          retryable,
        },
        'attempt failed',
      );
      const mayResend = retryable || (o.kind === 'failed' && !o.sent);
      if (!mayResend) {
        if (o.kind === 'answer') {
          settle(relay(o, attempt.node, false));
          return;
        }
        settle(
          errorAnswer(
            'NodeFailed',
            `node ${attempt.node.id} failed before answering (${o.reason}); the request may or may not have been applied and was not re-sent because it carries no idempotency key`,
          ),
        );
        return;
      }
      if (inFlight.size > 0) return; // the other attempt may still answer
      const next = pool.pick(tried);
      if (next) {
        metrics.failovers.inc();
        log.info({ procedure, from: attempt.node.url, to: next.url }, 'failover');
        send(next, false);
        return;
      }
      if (last5xx) {
        settle(relay(last5xx.o, last5xx.node, false));
        return;
      }
      settle(errorAnswer('NoNodeAvailable', `no node could answer (${tried.size} tried)`));
    }

    function relay(
      o: AttemptOutcome & { kind: 'answer' },
      node: UpstreamNode,
      hedged: boolean,
    ): RoutedAnswer {
      return {
        status: o.status,
        headers: {
          ...responseHeaders(o.headers),
          [HEADERS.servedBy]: node.id,
          [HEADERS.hedged]: String(hedged),
        },
        body: o.body,
        outcome: 'answered',
      };
    }

    const first = pool.pick(tried);
    if (!first) {
      settle(errorAnswer('NoNodeAvailable', 'no node is up'));
      return;
    }
    send(first, false);
    if (retryable && config.hedge === 'on' && config.nodes.length > 1) {
      const p = latency.value();
      const delay = Math.min(
        config.hedgeMaxDelayMs,
        Math.max(config.hedgeMinDelayMs, p ?? config.hedgeMaxDelayMs),
      );
      hedgeTimer = setTimeout(() => {
        if (settled || hedgeSent || inFlight.size !== 1) return;
        const other = pool.pick(tried);
        if (!other) return;
        if (!budget.tryWithdraw()) {
          metrics.hedgesDenied.inc();
          return;
        }
        hedgeSent = true;
        metrics.hedgesSent.inc();
        log.debug({ procedure, node: other.url, delayMs: delay }, 'hedge sent');
        send(other, true);
      }, delay);
    }
  });
}

/** A node's response headers to pass back to the client, minus hop-by-hop ones. */
export function responseHeaders(h: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    if (k === 'connection' || k === 'keep-alive' || k === 'transfer-encoding' || k === 'content-length')
      continue;
    out[k] = v;
  }
  return out;
}
