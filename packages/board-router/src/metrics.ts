import { createMetricsRegistry, HttpMetrics } from '@support/server';
import { Counter, Gauge, Histogram } from 'prom-client';

/**
 * The router's Prometheus metrics, on a registry of its own (several routers may share a process in
 * tests), with the process metrics and HTTP series every server has (`@support/server`).
 */
export function createMetrics() {
  const registry = createMetricsRegistry();
  const http = new HttpMetrics(registry, 'board_router');
  const requests = new Counter({
    name: 'board_router_requests_total',
    help: 'Routed requests by procedure (or watch) and outcome (answered: a node answer relayed; or the router error tag)',
    labelNames: ['procedure', 'outcome'] as const,
    registers: [registry],
  });
  const hedgesSent = new Counter({
    name: 'board_router_hedges_sent_total',
    help: 'Backup (hedge) requests sent',
    registers: [registry],
  });
  const hedgesWon = new Counter({
    name: 'board_router_hedges_won_total',
    help: 'Requests whose answer came from a hedge request',
    registers: [registry],
  });
  const hedgesDenied = new Counter({
    name: 'board_router_hedges_denied_total',
    help: 'Hedges not sent because the budget was spent',
    registers: [registry],
  });
  const failovers = new Counter({
    name: 'board_router_failovers_total',
    help: 'Attempts moved to another node after a transport failure or 5xx',
    registers: [registry],
  });
  const nodeLatency = new Histogram({
    name: 'board_router_node_latency_seconds',
    help: 'Latency of attempts that a node answered, per node URL',
    labelNames: ['node'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const nodeUp = new Gauge({
    name: 'board_router_node_up',
    help: '1 when the node is up (routable), 0 otherwise',
    labelNames: ['node'] as const,
    registers: [registry],
  });
  return { registry, http, requests, hedgesSent, hedgesWon, hedgesDenied, failovers, nodeLatency, nodeUp };
}

export type Metrics = ReturnType<typeof createMetrics>;
