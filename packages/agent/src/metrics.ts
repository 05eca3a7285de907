import { statfs } from 'node:fs/promises';
import { AGENT_VM_STATES, type AgentVm } from '@orch/protocol';
import { createMetricsRegistry, HttpMetrics } from '@support/server';
import { Counter, Gauge, Histogram } from 'prom-client';

/** Buckets (seconds) of boots, restores, snapshots and execs: 50 ms to 10 min. */
const VM_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

/** How a VM was started: a cold boot, from a disk snapshot, or a live restore (memory and CPU state). */
export type BootMode = 'cold' | 'disk_snapshot' | 'live_restore';

/**
 * orch-agent's Prometheus metrics (`GET /metrics`, behind the agent's bearer token like every other
 * route): process metrics, HTTP by route template, VMs by state, boot / live-restore / snapshot /
 * exec durations, the accelerator in use, and free disk space in the data directory. No label
 * carries a VM or snapshot id.
 */
export class AgentMetrics {
  readonly registry = createMetricsRegistry();
  readonly http = new HttpMetrics(this.registry, 'orch_agent');
  readonly boots = new Counter({
    name: 'orch_agent_vm_boots_total',
    help: 'VM starts by mode (cold, disk_snapshot, live_restore) and outcome (running, failed)',
    labelNames: ['mode', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly bootDuration = new Histogram({
    name: 'orch_agent_vm_boot_duration_seconds',
    help: 'Time from the create request to a running VM (guest agent answering), by mode',
    labelNames: ['mode'] as const,
    buckets: VM_BUCKETS,
    registers: [this.registry],
  });
  readonly snapshots = new Counter({
    name: 'orch_agent_snapshots_total',
    help: 'Snapshots taken by kind written (live, disk) and outcome',
    labelNames: ['kind', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly snapshotDuration = new Histogram({
    name: 'orch_agent_snapshot_duration_seconds',
    help: 'Time to take a snapshot, by kind written',
    labelNames: ['kind'] as const,
    buckets: VM_BUCKETS,
    registers: [this.registry],
  });
  readonly execs = new Counter({
    name: 'orch_agent_execs_total',
    help: 'Commands run in VMs by outcome (exited, timed_out, failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly execDuration = new Histogram({
    name: 'orch_agent_exec_duration_seconds',
    help: 'Duration of commands run in VMs',
    buckets: VM_BUCKETS,
    registers: [this.registry],
  });

  /**
   * The gauges read at scrape time: VMs by state (from `list`), the accelerator (an info gauge, 1
   * on the one in use) and free bytes in `dataDir`'s file system.
   */
  watch(opts: { list: () => readonly AgentVm[]; accelerator: string; dataDir: string }): void {
    new Gauge({
      name: 'orch_agent_vms',
      help: 'VMs on this host by state',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const state of AGENT_VM_STATES) this.set({ state }, 0);
        for (const vm of opts.list()) this.inc({ state: vm.state });
      },
    });
    new Gauge({
      name: 'orch_agent_accelerator_info',
      help: 'The VM accelerator in use (kvm, tcg, none): 1 on that label',
      labelNames: ['accelerator'] as const,
      registers: [this.registry],
    }).set({ accelerator: opts.accelerator }, 1);
    new Gauge({
      name: 'orch_agent_disk_free_bytes',
      help: 'Bytes available to the agent in its data directory file system',
      registers: [this.registry],
      async collect() {
        const fs = await statfs(opts.dataDir).catch(() => undefined);
        if (fs) this.set(fs.bavail * fs.bsize);
      },
    });
  }
}
