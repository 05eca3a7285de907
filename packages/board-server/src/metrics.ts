import { createMetricsRegistry, HttpMetrics } from '@support/server';
import { Counter, Gauge } from 'prom-client';
import type { ChangeNotifier } from './changelog/change-notifier.js';
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

  constructor(replicas: ReplicaCache, notifier: ChangeNotifier) {
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
        this.set(notifier.watcherCount);
      },
    });
  }

  /** Counts one procedure call; `outcome` is `ok` or the envelope's error tag (both bounded). */
  procedure(procedure: string, outcome: string): void {
    this.procedures.inc({ procedure, outcome });
  }
}
