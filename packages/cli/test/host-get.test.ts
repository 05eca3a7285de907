import { expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/** `orch host get` of a GPU host: its health detail, GPU detection, passthrough, and one row per GPU. */

const base = {
  id: 'g1',
  kind: 'gpu',
  agent_url: 'http://10.0.0.7:9090',
  token_source: 'registered',
  arch: 'amd64',
  version: '0.1.0',
  accelerator: 'tcg',
  state: 'active',
  health: 'healthy',
  capacity: { cpus: 64, ram_mb: 1048576, disk_gb: 2000 },
  free: { cpus: 64, ram_mb: 1048576, disk_gb: 2000 },
  images: ['busybox'],
  image_details: [],
  gpus: [{ model: 'h100', count: 1, free: 1, mig_profiles: ['1g.10gb'] }],
  labels: {},
  last_seen_at: null,
  created_at: '2026-11-29T00:00:00.000Z',
  updated_at: '2026-11-29T00:00:00.000Z',
};
const gpu = {
  index: 0,
  uuid: 'GPU-4b6a1c2e-9f7d-4e3a-b1c5-7d2e8f9a0b11',
  name: 'NVIDIA H100 80GB HBM3',
  model: 'h100',
  pci_address: '0000:18:00.0',
  memory_mb: 81559,
  memory_used_mb: 0,
  mig_mode: 'disabled',
  driver: 'nvidia',
  iommu_group: 12,
  iommu_group_devices: ['0000:18:00.0'],
  held_by: null,
  mig_profiles: [],
  mig_instances: [],
};
const mig = {
  ...gpu,
  index: 1,
  uuid: 'GPU-9c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f',
  pci_address: '0000:3b:00.0',
  mig_mode: 'enabled',
  iommu_group: 13,
  held_by: 'env_1',
  mig_instances: Array.from({ length: 7 }, (_, i) => ({
    profile: '1g.10gb',
    gi: 7 + i,
    compute_instances: 1,
  })),
};

test('a GPU host: detection, what passthrough lacks, and each GPU with PCI address, driver, IOMMU group, MIG', async ({
  orchd,
  config,
}) => {
  config.connectTo(orchd.url);
  orchd.answer(
    json({
      ...base,
      health_detail: 'GPUs detected but not passable to VMs: missing KVM (tcg)',
      gpu_devices: [gpu, mig],
      gpu_status: {
        state: 'ok',
        detail: null,
        driver_version: '550.54.15',
        passthrough: { available: false, missing: ['KVM (tcg)'] },
        checked_at: '2026-11-29T00:00:00.000Z',
      },
    }),
  );
  const r = await runOrchAsync(['host', 'get', 'g1'], config.dir);
  expect(r.code).toBe(0);
  const lines = r.stdout.split('\n');
  expect(lines).toContain('health detail: GPUs detected but not passable to VMs: missing KVM (tcg)');
  expect(lines).toContain('gpu detection: ok, driver 550.54.15');
  expect(lines).toContain('gpu passthrough: no: missing KVM (tcg)');
  expect(lines.find((l) => l.startsWith('GPU'))?.split(/\s{2,}/)).toEqual([
    'GPU',
    'MODEL',
    'NAME',
    'MEMORY MB',
    'PCI',
    'DRIVER',
    'IOMMU',
    'MIG',
    'HELD BY',
  ]);
  expect(lines.find((l) => l.includes('0000:18:00.0'))?.split(/\s{2,}/)).toEqual([
    '0',
    'h100',
    'NVIDIA H100 80GB HBM3',
    '81559',
    '0000:18:00.0',
    'nvidia',
    '12',
    'disabled',
    '-',
  ]);
  expect(lines.find((l) => l.includes('0000:3b:00.0'))).toMatch(/\s7x 1g\.10gb\s+env_1$/);
});

test('a GPU host whose driver is missing says so; a microvm host shows no GPU lines', async ({
  orchd,
  config,
}) => {
  config.connectTo(orchd.url);
  orchd.answer(
    json({
      ...base,
      health_detail: 'GPU detection: NVIDIA driver not loaded (nvidia-smi exit 9: ...)',
      gpus: [],
      gpu_devices: [],
      gpu_status: {
        state: 'no_driver',
        detail: 'NVIDIA driver not loaded (nvidia-smi exit 9: ...)',
        driver_version: null,
        passthrough: { available: true, missing: [] },
        checked_at: '2026-11-29T00:00:00.000Z',
      },
    }),
  );
  const r = await runOrchAsync(['host', 'get', 'g1'], config.dir);
  expect(r.stdout).toContain(
    'gpu detection: no_driver (NVIDIA driver not loaded (nvidia-smi exit 9: ...))\n',
  );
  expect(r.stdout).toContain('gpu passthrough: yes (VFIO)\n');
  orchd.answer(
    json({ ...base, kind: 'microvm', health_detail: null, gpus: [], gpu_devices: [], gpu_status: null }),
  );
  const micro = await runOrchAsync(['host', 'get', 'g1'], config.dir);
  expect(micro.code).toBe(0);
  expect(micro.stdout).not.toContain('gpu');
});
