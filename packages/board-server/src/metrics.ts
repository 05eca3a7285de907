import { createMetricsRegistry, HttpMetrics } from '@support/server';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { ReplicaCache } from './replica/replica-cache.js';

/**
 * board-node's Prometheus metrics (`GET /metrics`): process metrics, HTTP by route template,
 * procedure calls (queries, mutations, ...) by outcome tag, replica cache outcomes
 * (`hit`/`reattach`/`rebuild`, and evictions), open replicas and their memory, and watchers. Read
 * from the node's own counters at scrape time where it keeps them. No label carries a board id.
 */
export class BoardNodeMetrics {
  readonly registry = createMetricsRegistry();
  readonly http = new HttpMetrics(this.registry, 'board_node');
  private readonly procedures = new Counter({
    name: 'board_node_procedure_calls_total',
    help: 'Procedure calls (query.execute, mutate.*, changes.read, node.stats) by outcome: ok or the error tag',
    labelNames: ['procedure', 'outcome'] as const,
    registers: [this.registry],
  });

  /** From a change's write (its transaction's time) to its push on a watch stream. */
  readonly changeLag = new Histogram({
    name: 'board_node_change_lag_seconds',
    help: 'Time from a change being written (its transaction time) to its push to a watcher (catch-up of older changes on connect excluded)',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  constructor(
    replicas: ReplicaCache,
    watch: { readonly watcherCount: number; readonly slowConsumers: number },
  ) {
    new Counter({
      name: 'board_node_replica_syncs_total',
      help: 'Replica cache outcomes of queries: hit (open and current), reattach (file reopened), rebuild (from the base table), evicted',
      labelNames: ['mode'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [mode, n] of Object.entries(replicas.counters)) this.inc({ mode }, n);
      },
    });
    new Counter({
      name: 'board_node_query_paths_total',
      help: 'query.execute answers by the path that read them: key_index (a point lookup by id, from the replica key index) or duckdb',
      labelNames: ['path'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc({ path: 'key_index' }, replicas.paths.keyIndex);
        this.inc({ path: 'duckdb' }, replicas.paths.duckdb);
      },
    });
    new Gauge({
      name: 'board_node_replicas_open',
      help: 'Replicas open (DuckDB instances) on this node',
      registers: [this.registry],
      collect() {
        this.set(replicas.stats().open);
      },
    });
    new Gauge({
      name: 'board_node_replica_memory_bytes',
      help: 'Memory the open replicas held after their last sampled request',
      registers: [this.registry],
      collect() {
        this.set(replicas.stats().memoryInUseBytes);
      },
    });
    new Gauge({
      name: 'board_node_replica_memory_budget_bytes',
      help: 'The replica memory budget (BOARD_REPLICA_MEMORY_MB)',
      registers: [this.registry],
      collect() {
        this.set(replicas.stats().memoryBudgetMb * 2 ** 20);
      },
    });
    new Gauge({
      name: 'board_node_watchers',
      help: 'Watch streams open on this node',
      registers: [this.registry],
      collect() {
        this.set(watch.watcherCount);
      },
    });
    new Counter({
      name: 'board_node_watch_slow_consumers_total',
      help: 'Watch streams cut off (error SlowConsumer) for holding more than BOARD_WATCH_BUFFER_BYTES unsent',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(watch.slowConsumers);
      },
    });
  }

  /** A change written at `committedMs` reached `streams` watch streams now (one observation each). */
  observeChangeLag(committedMs: number, streams: number): void {
    const seconds = Math.max(0, Date.now() - committedMs) / 1000;
    for (let i = 0; i < streams; i++) this.changeLag.observe(seconds);
  }

  /** Counts one procedure call; `outcome` is `ok` or the envelope's error tag (both bounded). */
  procedure(procedure: string, outcome: string): void {
    this.procedures.inc({ procedure, outcome });
  }
}
