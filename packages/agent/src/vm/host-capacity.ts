import { statfs } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import type { Resources } from '@orch/protocol';
import { AgentError } from '../errors.js';
import type { Vm } from './vm.js';

/** Free space below which VM disks and snapshots are refused (qcow2 disks grow as the guest writes). */
export const MIN_FREE_BYTES = 512 * 2 ** 20;

/**
 * CPUs, RAM and disk: what the host has, and what the live ones of `vms` leave free (disk: what
 * the file system of the data dir `root` has free).
 */
export async function hostResources(
  root: string,
  vms: Iterable<Vm>,
): Promise<{ capacity: Resources; free: Resources }> {
  const fs = await statfs(root).catch(() => undefined);
  const gb = 2 ** 30;
  const capacity = {
    cpus: cpus().length,
    ram_mb: Math.floor(totalmem() / 2 ** 20),
    disk_gb: fs ? Math.floor((fs.blocks * fs.bsize) / gb) : 0,
  };
  // A paused VM holds no CPU or RAM (its QEMU has ended); one pausing or resuming still does.
  const live = [...vms].filter((v) =>
    ['creating', 'running', 'pausing', 'resuming'].includes(v.record.state),
  );
  return {
    capacity,
    free: {
      cpus: Math.max(0, capacity.cpus - live.reduce((n, v) => n + v.record.spec.cpus, 0)),
      ram_mb: Math.max(0, capacity.ram_mb - live.reduce((n, v) => n + v.record.spec.ram_mb, 0)),
      disk_gb: fs ? Math.floor((fs.bavail * fs.bsize) / gb) : 0,
    },
  };
}

/** Refuses (`disk_full`) unless the file system of the data dir `root` has `bytes` free. */
export async function requireFreeSpace(root: string, bytes: number): Promise<void> {
  const fs = await statfs(root);
  const free = fs.bavail * fs.bsize;
  if (free < bytes) {
    throw AgentError.diskFull(
      `not enough free disk space in ${root}: ${Math.floor(free / 2 ** 20)} MiB free, ${Math.ceil(bytes / 2 ** 20)} MiB needed`,
      { free_bytes: free, needed_bytes: bytes },
    );
  }
}
