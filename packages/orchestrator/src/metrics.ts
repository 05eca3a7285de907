import type { AgentGpuDevice } from '@orch/protocol';
import { createMetricsRegistry, HttpMetrics, type Logger } from '@support/server';
import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Database } from './store/schema.js';

/** Why a placement failed (bounded: never a host id or a message). */
export type PlacementFailure = 'no_host_registered' | 'never_fits' | 'no_capacity';

/** Every `outcome` of `orchd_placements_total`: placed, a refusal, a full queue, or contention that outlasted the retries. */
export type PlacementOutcomeLabel = 'placed' | PlacementFailure | 'queue_full' | 'contended';

/** Buckets (seconds) of agent calls and snapshot operations: 5 ms to 10 min. */
const SLOW_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * orchd's Prometheus metrics (`GET /metrics`), one registry per process: process metrics, HTTP by
 * route template, and the orchestrator's own series (see the package README, "Metrics"). Labels are
 * bounded: states, reasons, outcomes, kinds, and host ids (hosts are registered by the operator).
 * Record and row counts by state are read from the store at scrape time, so every orchd sharing a
 * database reports the same numbers.
 */
export class OrchdMetrics {
  readonly registry = createMetricsRegistry();
  readonly http = new HttpMetrics(this.registry, 'orchd');
  readonly environmentsCreated = new Counter({
    name: 'orchd_environments_created_total',
    help: 'Environment creations accepted by this orchd (placed and handed to an agent), by origin',
    labelNames: ['origin'] as const,
    registers: [this.registry],
  });
  readonly placements = new Counter({
    name: 'orchd_placements_total',
    help: 'Placement decisions by outcome: placed, or the failure reason',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly reconcilerRuns = new Counter({
    name: 'orchd_reconciler_runs_total',
    help: 'Reconciliation rounds by outcome (ok, failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly reconcilerFixes = new Counter({
    name: 'orchd_reconciler_fixes_total',
    help: 'Corrections the reconciler made, by action',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  readonly agentCalls = new Counter({
    name: 'orchd_agent_calls_total',
    help: 'Calls to host agents by host and outcome (ok, or the failure kind)',
    labelNames: ['host', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly agentCallDuration = new Histogram({
    name: 'orchd_agent_call_duration_seconds',
    help: 'Duration of calls to host agents, by host',
    labelNames: ['host'] as const,
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });
  readonly snapshotOperations = new Counter({
    name: 'orchd_snapshot_operations_total',
    help: 'Snapshot creates and restores by operation, kind (live, disk) and outcome',
    labelNames: ['operation', 'kind', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly snapshotDuration = new Histogram({
    name: 'orchd_snapshot_duration_seconds',
    help: 'Duration of snapshot creates and restores (the agent call), by operation and kind',
    labelNames: ['operation', 'kind'] as const,
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });

  /** Adds the gauges read from the store at scrape time (environments, snapshots, hosts by state). */
  watchStore(db: Kysely<Database>, logger: Logger): void {
    const byState = (
      name: string,
      help: string,
      labels: readonly string[],
      read: () => Promise<{ labels: Record<string, string>; n: number }[]>,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: labels,
        registers: [this.registry],
        async collect() {
          try {
            const rows = await read();
            this.reset();
            for (const r of rows) this.set(r.labels, r.n);
          } catch (err) {
            // A store outage must not fail the scrape: the gauge keeps its last values.
            logger.warn({ err: (err as Error).message, metric: name }, 'metrics: store not readable');
          }
        },
      });
    byState('orchd_environments', 'Environments by state (from the store)', ['state'], async () =>
      (
        await db
          .selectFrom('environments')
          .select(['state', db.fn.countAll<string>().as('n')])
          .groupBy('state')
          .execute()
      ).map((r) => ({ labels: { state: r.state }, n: Number(r.n) })),
    );
    byState('orchd_snapshots', 'Snapshots by state (from the store)', ['state'], async () =>
      (
        await db
          .selectFrom('snapshots')
          .select(['state', db.fn.countAll<string>().as('n')])
          .groupBy('state')
          .execute()
      ).map((r) => ({ labels: { state: r.state }, n: Number(r.n) })),
    );
    byState(
      'orchd_hosts',
      'Hosts by kind, state and health (from the store)',
      ['kind', 'state', 'health'],
      async () =>
        (
          await db
            .selectFrom('hosts')
            .select(['kind', 'state', 'health', db.fn.countAll<string>().as('n')])
            .groupBy(['kind', 'state', 'health'])
            .execute()
        ).map((r) => ({ labels: { kind: r.kind, state: r.state, health: r.health }, n: Number(r.n) })),
    );
    const gpuFacts = () =>
      db.selectFrom('hosts').select(['id', 'gpu_devices', 'gpu_status']).orderBy('id').execute();
    byState(
      'orchd_host_gpus',
      'GPUs each host reported at its last health check, by catalog model (other: unknown to the catalog), MIG mode and whether a VM holds it',
      ['host', 'model', 'mig_mode', 'held'],
      async () => gpuRows(await gpuFacts()),
    );
    byState(
      'orchd_host_gpu_mig_instances',
      'MIG GPU instances (with a compute instance) each host reported, by model and profile',
      ['host', 'model', 'profile'],
      async () => migRows(await gpuFacts()),
    );
    byState(
      'orchd_host_gpu_detection',
      '1 per host that detects GPUs, labelled with the detection state (ok, no_gpu, no_driver, error) and whether it can pass whole GPUs to VMs',
      ['host', 'state', 'passthrough'],
      async () =>
        (await gpuFacts())
          .filter((h) => h.gpu_status !== null)
          .map((h) => ({
            labels: {
              host: h.id,
              state: h.gpu_status!.state,
              passthrough: String(h.gpu_status!.passthrough.available),
            },
            n: 1,
          })),
    );
  }

  /** An observer for one host's agent calls (see `AgentClient`). */
  agentObserver(host: string): AgentCallObserver {
    return (outcome, seconds) => {
      this.agentCalls.inc({ host, outcome });
      this.agentCallDuration.observe({ host }, seconds);
    };
  }
}

/** Told of every finished agent call: `ok` or the failure kind, and its duration. */
export type AgentCallObserver = (outcome: string, seconds: number) => void;

type GpuFacts = { id: string; gpu_devices: AgentGpuDevice[] };

/** Device counts per host, model, MIG mode and held (bounded labels: catalog models, three modes). */
export function gpuRows(hosts: readonly GpuFacts[]): { labels: Record<string, string>; n: number }[] {
  const counts = new Map<string, { labels: Record<string, string>; n: number }>();
  for (const h of hosts)
    for (const d of h.gpu_devices) {
      const labels = {
        host: h.id,
        model: d.model ?? 'other',
        mig_mode: d.mig_mode,
        held: String(d.held_by !== null),
      };
      const key = JSON.stringify(labels);
      counts.set(key, { labels, n: (counts.get(key)?.n ?? 0) + 1 });
    }
  return [...counts.values()];
}

/** MIG instances with a compute instance per host, model and profile. */
export function migRows(hosts: readonly GpuFacts[]): { labels: Record<string, string>; n: number }[] {
  const counts = new Map<string, { labels: Record<string, string>; n: number }>();
  for (const h of hosts)
    for (const d of h.gpu_devices)
      for (const i of d.mig_instances) {
        if (i.compute_instances === 0) continue;
        const labels = { host: h.id, model: d.model ?? 'other', profile: i.profile };
        const key = JSON.stringify(labels);
        counts.set(key, { labels, n: (counts.get(key)?.n ?? 0) + 1 });
      }
  return [...counts.values()];
}
