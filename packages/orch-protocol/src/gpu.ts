import { z } from 'zod';
import { gpuKey } from './gpu-catalog.js';
import { text } from './text.js';

/** The zod-free part (catalog, names, keys) is in gpu-catalog.ts, so `orch compile` loads no zod. */
export {
  findGpuModel,
  GPU_MODELS,
  type GpuModel,
  gpuKey,
  gpuModelOf,
  MIG_VM_REFUSAL,
  migProfileName,
} from './gpu-catalog.js';

/** MIG mode of a GPU: `enabled`, `disabled`, or `unsupported` (`[N/A]`: not a MIG-capable GPU). */
export const MIG_MODES = ['enabled', 'disabled', 'unsupported'] as const;

/** One MIG profile of a MIG-enabled GPU (`nvidia-smi mig -lgip`): how many more instances could be created. */
export const GpuMigProfile = z
  .object({
    profile: text(64, 1),
    /** The GPU instance profile id (`-cgi` takes it). */
    profile_id: z.number().int().nonnegative(),
    /** Instances of this profile that could still be created / at most on this GPU. */
    creatable: z.number().int().nonnegative(),
    max: z.number().int().nonnegative(),
    memory_gb: z.number().nonnegative(),
  })
  .meta({ id: 'GpuMigProfile' });
export type GpuMigProfile = z.infer<typeof GpuMigProfile>;

/** One existing MIG GPU instance (`nvidia-smi mig -lgi`, its compute instances from `-lci`). */
export const GpuMigInstance = z
  .object({
    profile: text(64, 1),
    /** GPU instance id. */
    gi: z.number().int().nonnegative(),
    /** Compute instances inside it (0: created without one; CUDA cannot use it yet). */
    compute_instances: z.number().int().nonnegative(),
  })
  .meta({ id: 'GpuMigInstance' });
export type GpuMigInstance = z.infer<typeof GpuMigInstance>;

/** One physical NVIDIA GPU of a host, as its agent detected it (nvidia-smi and sysfs). */
export const AgentGpuDevice = z
  .object({
    index: z.number().int().nonnegative(),
    uuid: text(128),
    /** The product name as nvidia-smi prints it (`NVIDIA H100 80GB HBM3`). */
    name: text(256),
    /** The catalog model ({@link gpuModelOf}), or null for a GPU the catalog does not know. */
    model: text(64).nullable(),
    /** PCI address in sysfs form, `0000:18:00.0`. */
    pci_address: text(64),
    memory_mb: z.number().int().nonnegative(),
    memory_used_mb: z.number().int().nonnegative(),
    mig_mode: z.enum(MIG_MODES),
    /** The kernel driver bound to it now (`nvidia`, `vfio-pci`), or null for none. */
    driver: text(64).nullable(),
    /** Its IOMMU group, or null when the host has no IOMMU (then it cannot be passed through). */
    iommu_group: z.number().int().nonnegative().nullable(),
    /** Every PCI function in that group (all go to the guest together). */
    iommu_group_devices: z.array(text(64)).max(64).default([]),
    /** The VM holding it (whole-GPU passthrough), or null. */
    held_by: text(128).nullable().default(null),
    mig_profiles: z.array(GpuMigProfile).max(64).default([]),
    mig_instances: z.array(GpuMigInstance).max(64).default([]),
  })
  .meta({ id: 'AgentGpuDevice' });
export type AgentGpuDevice = z.infer<typeof AgentGpuDevice>;

/**
 * The state of GPU detection on a host: `ok` (nvidia-smi answered; `gpu_devices` lists the GPUs),
 * `no_gpu` (no NVIDIA PCI device and no nvidia-smi: a host without GPUs), `no_driver` (NVIDIA PCI
 * devices, or nvidia-smi, but the driver does not answer), `error` (nvidia-smi failed otherwise or
 * printed what cannot be parsed). Anything but `ok` comes with `detail`.
 */
export const GPU_DETECTION_STATES = ['ok', 'no_gpu', 'no_driver', 'error'] as const;

/**
 * What a host can do with its GPUs: detection, and whether whole GPUs can go to VMs (and why not).
 * Inlined in the OpenAPI document (no schema id): it is nullable, and OpenAPI 3.0 cannot put
 * `nullable` beside a `$ref`.
 */
export const AgentGpuStatus = z.object({
  state: z.enum(GPU_DETECTION_STATES),
  detail: text(2000).nullable(),
  driver_version: text(64).nullable(),
  /** Whole-GPU passthrough by VFIO: possible, or what is missing (`KVM`, `an IOMMU`, `the vfio-pci driver`). */
  passthrough: z.object({
    available: z.boolean(),
    missing: z.array(text(300)).max(16),
  }),
  /** When detection ran (ISO 8601). */
  checked_at: text(64),
});
export type AgentGpuStatus = z.infer<typeof AgentGpuStatus>;

/**
 * The devices a host offers per {@link gpuKey}: whole GPUs of a catalog model whose MIG mode is not
 * `enabled` and which are in an IOMMU group (`h100` -> 2), and existing MIG instances with a compute
 * instance per model and profile (`h100/1g.10gb` -> 7). What VMs already hold is not subtracted.
 */
export function gpuSupply(devices: readonly AgentGpuDevice[]): Map<string, number> {
  const supply = new Map<string, number>();
  const add = (key: string) => supply.set(key, (supply.get(key) ?? 0) + 1);
  for (const d of devices) {
    if (d.model === null) continue;
    if (d.mig_mode !== 'enabled') {
      if (d.iommu_group !== null) add(gpuKey({ model: d.model }));
      continue;
    }
    for (const i of d.mig_instances)
      if (i.compute_instances > 0) add(gpuKey({ model: d.model, mig: i.profile }));
  }
  return supply;
}

/** The MIG profiles that MIG-enabled GPUs of `model` offer (catalog spelling, sorted). */
export function migProfilesOffered(devices: readonly AgentGpuDevice[], model: string): string[] {
  const out = new Set<string>();
  for (const d of devices) {
    if (d.model !== model || d.mig_mode !== 'enabled') continue;
    for (const p of d.mig_profiles) out.add(p.profile);
    for (const i of d.mig_instances) out.add(i.profile);
  }
  return [...out].sort();
}

/**
 * The health detail of a host whose GPUs are not usable, from its GPU status: detection failed (no
 * driver, a failing nvidia-smi), or GPUs detected that cannot go to a VM (what is missing). Null
 * when all is well or the host has no GPU detection.
 */
export function gpuHealthDetail(status: AgentGpuStatus | null): string | null {
  if (status === null || status.state === 'no_gpu') return null;
  if (status.state !== 'ok') return `GPU detection: ${status.detail ?? status.state}`;
  if (!status.passthrough.available)
    return `GPUs detected but not passable to VMs: missing ${status.passthrough.missing.join('; ')}`;
  return null;
}
