import { AgentError } from '../errors.js';
import type { PassthroughGpu } from './passthrough-argv.js';

/**
 * A VM with passed-through GPUs cannot have its memory saved: QEMU blocks migration of a VFIO
 * device without vendor migration support (NVIDIA's data-centre GPUs have none under plain VFIO),
 * so pause, live snapshots and the suspend of a graceful agent stop are refused or skipped for it
 * (README "GPU hosts"). Disk snapshots work (QMP `stop` is allowed).
 */
export function refuseMemorySave(
  record: { id: string; gpu_passthrough?: PassthroughGpu[] },
  what: string,
  withGpus = !!record.gpu_passthrough?.length,
): void {
  if (!withGpus) return;
  throw AgentError.conflict(
    `VM ${JSON.stringify(record.id)} has GPUs passed through: ${what} is refused (QEMU cannot save or load a VFIO device's state)`,
    { id: record.id, reason: 'gpu_passthrough' },
  );
}
