import { type AgentGpuDevice, type AgentGpuStatus, gpuModelOf } from '@orch/protocol';
import {
  migInstancesOf,
  NO_MIG_INSTANCES,
  parseList,
  parseMigComputeInstances,
  parseMigInstances,
  parseMigProfiles,
  parseQueryGpu,
  runSmi,
  SMI_QUERIES,
  SmiParseError,
  type SmiResult,
} from './nvidia-smi.js';
import { hasIommu, hasVfioPci, iommuGroupDevices, nvidiaGpus, pciFunction } from './sysfs.js';

/** Where detection looks. */
export interface DetectOptions {
  /** The nvidia-smi program (a name looked up on PATH, or a path). */
  readonly nvidiaSmi: string;
  /** The sysfs root (`/sys`). */
  readonly sysfs: string;
  /** The accelerator VMs run under here (`kvm` is needed for passthrough). */
  readonly accelerator: string;
  readonly now?: () => Date;
}

/** What one detection found: the GPUs (none held yet: holds are the GPU manager's) and the host's state. */
export interface GpuDetection {
  readonly devices: AgentGpuDevice[];
  readonly status: AgentGpuStatus;
}

/** The first line of a failed command's output, trimmed to a sentence. */
function firstLine(text: string): string {
  return (text.split('\n').find((l) => l.trim() !== '') ?? '').trim().slice(0, 300);
}

/** Turns a failed `nvidia-smi` into a detection state and a detail an operator can act on. */
export function smiFailure(
  r: SmiResult & { ok: false },
  pciGpus: readonly string[],
): Pick<AgentGpuStatus, 'state' | 'detail'> {
  const onBus =
    pciGpus.length > 0 ? `${pciGpus.length} NVIDIA GPU(s) on the PCI bus (${pciGpus.join(', ')})` : '';
  if (r.missing) {
    if (pciGpus.length === 0)
      return {
        state: 'no_gpu',
        detail: 'no NVIDIA GPU on the PCI bus and no nvidia-smi: a host without GPUs',
      };
    return {
      state: 'no_driver',
      detail: `${onBus}, but nvidia-smi is not installed: install the NVIDIA driver`,
    };
  }
  const said = firstLine(r.output);
  if (/couldn't communicate with the NVIDIA driver/i.test(r.output))
    return {
      state: 'no_driver',
      detail: `NVIDIA driver not loaded (nvidia-smi exit ${r.exitCode}: ${said})${onBus ? `; ${onBus}` : ''}`,
    };
  if (/Driver\/library version mismatch/i.test(r.output))
    return {
      state: 'error',
      detail: `NVIDIA driver/library version mismatch: the loaded kernel module and the user-space library differ; reload the nvidia module or reboot (nvidia-smi exit ${r.exitCode}: ${said})`,
    };
  if (/No devices were found/i.test(r.output))
    return pciGpus.length === 0
      ? { state: 'no_gpu', detail: 'nvidia-smi found no GPU and none is on the PCI bus' }
      : {
          state: 'no_driver',
          detail: `nvidia-smi found no GPU although ${onBus}: is the nvidia module bound?`,
        };
  return {
    state: 'error',
    detail: `nvidia-smi failed (${r.exitCode === null ? 'no exit status' : `exit ${r.exitCode}`}): ${said || 'no output'}`,
  };
}

/** What passthrough by VFIO needs and this host lacks (empty: it can pass whole GPUs through). */
export async function passthroughMissing(sysfs: string, accelerator: string): Promise<string[]> {
  const missing: string[] = [];
  if (accelerator !== 'kvm')
    missing.push(
      `KVM (VMs here run under ${accelerator === 'none' ? 'no accelerator' : accelerator}: /dev/kvm is missing or does not run guests)`,
    );
  if (!(await hasIommu(sysfs)))
    missing.push(
      'an IOMMU (no group under /sys/kernel/iommu_groups: enable VT-d/AMD-Vi and boot with intel_iommu=on or amd_iommu=on)',
    );
  if (!(await hasVfioPci(sysfs))) missing.push('the vfio-pci driver (not loaded: modprobe vfio-pci)');
  return missing;
}

/**
 * Detects the host's NVIDIA GPUs: `nvidia-smi --query-gpu` (identity, memory, MIG mode), `-L`
 * (cross-checked), `mig -lgip/-lgi/-lci` for MIG-enabled GPUs, and sysfs for each GPU's bound driver
 * and IOMMU group. Never throws: a missing driver, a failing or hung nvidia-smi and output that
 * cannot be parsed all become a state and a detail.
 */
export async function detectGpus(opts: DetectOptions): Promise<GpuDetection> {
  const checked_at = (opts.now?.() ?? new Date()).toISOString();
  const missing = await passthroughMissing(opts.sysfs, opts.accelerator);
  const passthrough = { available: missing.length === 0, missing };
  const pci = (await nvidiaGpus(opts.sysfs)).map((f) => f.address);
  const status = (
    s: Pick<AgentGpuStatus, 'state' | 'detail'>,
    driver: string | null = null,
  ): AgentGpuStatus => ({
    ...s,
    driver_version: driver,
    passthrough,
    checked_at,
  });
  const q = await runSmi(opts.nvidiaSmi, SMI_QUERIES.gpus);
  if (!q.ok) return { devices: [], status: status(smiFailure(q, pci)) };
  try {
    const gpus = parseQueryGpu(q.stdout);
    const list = await runSmi(opts.nvidiaSmi, SMI_QUERIES.list);
    if (!list.ok) return { devices: [], status: status(smiFailure(list, pci)) };
    const listed = parseList(list.stdout);
    const a = gpus.map((g) => g.uuid).sort();
    const b = listed.map((g) => g.uuid).sort();
    if (a.join() !== b.join())
      throw new SmiParseError(
        `nvidia-smi -L lists ${b.length} GPU(s), --query-gpu ${a.length}: they disagree`,
      );
    let profiles = new Map<number, AgentGpuDevice['mig_profiles']>();
    let instances = new Map<number, { profile: string; gi: number }[]>();
    let computes = new Map<string, number>();
    if (gpus.some((g) => g.migMode === 'enabled')) {
      const lgip = await runSmi(opts.nvidiaSmi, SMI_QUERIES.migProfiles);
      if (!lgip.ok) return { devices: [], status: status(smiFailure(lgip, pci)) };
      profiles = parseMigProfiles(lgip.stdout);
      const lgi = await runSmi(opts.nvidiaSmi, SMI_QUERIES.migInstances);
      if (lgi.ok) instances = parseMigInstances(lgi.stdout);
      else if (!NO_MIG_INSTANCES.test(lgi.output))
        return { devices: [], status: status(smiFailure(lgi, pci)) };
      const lci = await runSmi(opts.nvidiaSmi, SMI_QUERIES.migComputeInstances);
      if (lci.ok) computes = parseMigComputeInstances(lci.stdout);
      else if (!NO_MIG_INSTANCES.test(lci.output))
        return { devices: [], status: status(smiFailure(lci, pci)) };
    }
    const devices: AgentGpuDevice[] = [];
    for (const g of gpus) {
      const fn = await pciFunction(opts.sysfs, g.pciAddress);
      const group = fn?.iommuGroup ?? null;
      devices.push({
        index: g.index,
        uuid: g.uuid,
        name: g.name,
        model: gpuModelOf(g.name, g.memoryMib) ?? null,
        pci_address: g.pciAddress,
        memory_mb: g.memoryMib,
        memory_used_mb: g.memoryUsedMib,
        mig_mode: g.migMode,
        driver: fn?.driver ?? null,
        iommu_group: group,
        iommu_group_devices: group === null ? [] : await iommuGroupDevices(opts.sysfs, group),
        held_by: null,
        mig_profiles: g.migMode === 'enabled' ? (profiles.get(g.index) ?? []) : [],
        mig_instances: g.migMode === 'enabled' ? migInstancesOf(g.index, instances, computes) : [],
      });
    }
    return { devices, status: status({ state: 'ok', detail: null }, gpus[0]?.driverVersion ?? null) };
  } catch (err) {
    if (!(err instanceof SmiParseError)) throw err;
    return {
      devices: [],
      status: status({
        state: 'error',
        detail: `nvidia-smi printed what cannot be parsed: ${err.message.slice(0, 500)}`,
      }),
    };
  }
}
