import { describe, expect, test } from 'vitest';
import {
  AgentGpuDevice,
  GPU_MODELS,
  gpuHealthDetail,
  gpuKey,
  gpuModelOf,
  gpuSupply,
  migProfileName,
} from './gpu.js';

const device = (over: Partial<AgentGpuDevice>): AgentGpuDevice =>
  AgentGpuDevice.parse({
    index: 0,
    uuid: 'GPU-1',
    name: 'NVIDIA H100 80GB HBM3',
    model: 'h100',
    pci_address: '0000:18:00.0',
    memory_mb: 81559,
    memory_used_mb: 0,
    mig_mode: 'disabled',
    driver: 'nvidia',
    iommu_group: 1,
    ...over,
  });

describe('one GPU vocabulary for compile rules, host reports and placement', () => {
  test('nvidia-smi product names map to catalog models (A100 by memory); unknown GPUs map to none', () => {
    const cases: [string, number, string | undefined][] = [
      ['NVIDIA H100 80GB HBM3', 81559, 'h100'],
      ['NVIDIA H100 PCIe', 81559, 'h100'],
      ['NVIDIA H100 NVL', 95830, 'h100'],
      ['NVIDIA H200', 143771, 'h200'],
      ['NVIDIA L40S', 46068, 'l40s'],
      ['NVIDIA L4', 23034, 'l4'],
      ['NVIDIA A10G', 23028, 'a10g'],
      ['NVIDIA A100-SXM4-40GB', 40960, 'a100-40gb'],
      ['NVIDIA A100 80GB PCIe', 81920, 'a100-80gb'],
      ['NVIDIA A100-SXM4-80GB', 81920, 'a100-80gb'],
      ['NVIDIA GeForce RTX 4090', 24564, undefined],
      ['NVIDIA L40', 46068, undefined],
    ];
    for (const [name, mem, model] of cases) expect([name, gpuModelOf(name, mem)]).toEqual([name, model]);
    // Every model detection can report is one the definition file accepts.
    const names = new Set(GPU_MODELS.map((m) => m.name));
    for (const [, , model] of cases) if (model) expect(names.has(model)).toBe(true);
  });

  test('MIG profile names in the catalog spelling; usage keys per model and profile', () => {
    expect(migProfileName('MIG 1g.10gb')).toBe('1g.10gb');
    expect(migProfileName('MIG 1g.10gb+me')).toBe('1g.10gb+me');
    expect(gpuKey({ model: 'h100' })).toBe('h100');
    expect(gpuKey({ model: 'h100', mig: '1g.10gb' })).toBe('h100/1g.10gb');
  });

  test('supply: whole GPUs out of MIG mode with an IOMMU group; MIG instances with a compute instance', () => {
    const supply = gpuSupply([
      device({}),
      device({ pci_address: '0000:19:00.0', iommu_group: null }),
      device({ pci_address: '0000:1a:00.0', model: null, name: 'NVIDIA GeForce RTX 4090' }),
      device({
        pci_address: '0000:3b:00.0',
        mig_mode: 'enabled',
        mig_instances: [
          { profile: '1g.10gb', gi: 7, compute_instances: 1 },
          { profile: '1g.10gb', gi: 8, compute_instances: 0 },
          { profile: '3g.40gb', gi: 2, compute_instances: 1 },
        ],
      }),
    ]);
    expect(Object.fromEntries(supply)).toEqual({ h100: 1, 'h100/1g.10gb': 1, 'h100/3g.40gb': 1 });
  });

  test('health detail: detection failures and missing passthrough are said; all well or no GPU is null', () => {
    const status = {
      state: 'ok' as const,
      detail: null,
      driver_version: '550',
      passthrough: { available: true, missing: [] },
      checked_at: '',
    };
    expect(gpuHealthDetail(null)).toBeNull();
    expect(gpuHealthDetail(status)).toBeNull();
    expect(gpuHealthDetail({ ...status, state: 'no_gpu', detail: 'none' })).toBeNull();
    expect(gpuHealthDetail({ ...status, state: 'no_driver', detail: 'NVIDIA driver not loaded' })).toBe(
      'GPU detection: NVIDIA driver not loaded',
    );
    expect(
      gpuHealthDetail({ ...status, passthrough: { available: false, missing: ['KVM', 'an IOMMU'] } }),
    ).toBe('GPUs detected but not passable to VMs: missing KVM; an IOMMU');
  });
});
