import type { AgentGpuDevice, AgentGpuStatus } from '@orch/protocol';

/**
 * GPU facts as a GPU host's agent reports them (`gpu_devices`, `gpu_status` of `/v1/info` and of
 * `Host`), for placement, store and metrics tests: an H100 80GB by default.
 */
export function gpuDevice(pci: string, over: Partial<AgentGpuDevice> = {}): AgentGpuDevice {
  return {
    index: 0,
    uuid: `GPU-${pci.replace(/[:.]/g, '')}-0000-4000-8000-000000000000`,
    name: 'NVIDIA H100 80GB HBM3',
    model: 'h100',
    pci_address: pci,
    memory_mb: 81559,
    memory_used_mb: 0,
    mig_mode: 'disabled',
    driver: 'nvidia',
    iommu_group: 12,
    iommu_group_devices: [pci],
    held_by: null,
    mig_profiles: [],
    mig_instances: [],
    ...over,
  };
}

/** An H100 in MIG mode with seven 1g.10gb instances, each with a compute instance. */
export function migH100(pci: string): AgentGpuDevice {
  return gpuDevice(pci, {
    mig_mode: 'enabled',
    mig_profiles: [
      { profile: '1g.10gb', profile_id: 19, creatable: 0, max: 7, memory_gb: 9.75 },
      { profile: '3g.40gb', profile_id: 9, creatable: 0, max: 2, memory_gb: 39.5 },
    ],
    mig_instances: Array.from({ length: 7 }, (_, i) => ({
      profile: '1g.10gb',
      gi: 7 + i,
      compute_instances: 1,
    })),
  });
}

/** Detection state: `ok` with passthrough available unless told otherwise. */
export function gpuStatus(over: Partial<AgentGpuStatus> = {}): AgentGpuStatus {
  return {
    state: 'ok',
    detail: null,
    driver_version: '550.54.15',
    passthrough: { available: true, missing: [] },
    checked_at: '2026-11-29T00:00:00.000Z',
    ...over,
  };
}
