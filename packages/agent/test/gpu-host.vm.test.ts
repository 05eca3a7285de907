import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentInfo } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, qemuAvailable } from './agent-process.js';
import { fakeSysfs, SMI_BIN_DIR, useSmiCase } from './gpu-fixtures.js';

/**
 * A GPU host through the product: a real `orch-agent` started with `GPU_AGENT_TOKEN`, the fake
 * nvidia-smi first on its PATH and `AGENT_SYSFS_ROOT` on a fake sysfs tree. Detection runs at every
 * `GET /v1/info` (orchd's health check), so one agent answers each fixture in turn. Needs QEMU and
 * the guest kernel (creates get past those checks to the GPU refusal); boots nothing.
 */
const hasQemu = qemuAvailable();
const dir = mkdtempSync(join(tmpdir(), 'orch-gpu-host-'));
const smiDir = join(dir, 'smi');
const sysfs = join(dir, 'sys');
let agent: AgentProcess;
let dataDir: string;

const info = async () => (await agent.request<AgentInfo>('GET', '/v1/info')).body;
const createGpuVm = (gpu: { model: string; count: number; mig?: string }, id = 'gpuvm1') =>
  agent.request<{ error: { code: string; message: string; details: Record<string, unknown> } }>(
    'POST',
    '/v1/vms',
    {
      id,
      spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60, gpu },
      manifest_inline: Buffer.from(
        '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
      ).toString('base64'),
      startup_script: 'nvidia-smi\n',
    },
  );

describe.skipIf(!hasQemu)('a GPU host agent with a fake nvidia-smi and sysfs', () => {
  beforeAll(async () => {
    fakeSysfs(sysfs, [
      { address: '0000:18:00.0', driver: 'nvidia', group: 12 },
      { address: '0000:18:00.1', pciClass: '0x040300', driver: 'snd_hda_intel', group: 12 },
    ]);
    useSmiCase(smiDir, 'h100');
    dataDir = AgentProcess.makeDataDir();
    const token = 'gpu-token-0123456789';
    agent = await AgentProcess.start({
      dataDir,
      token,
      env: {
        MICROVM_AGENT_TOKEN: '',
        GPU_AGENT_TOKEN: token,
        PATH: `${SMI_BIN_DIR}:${process.env.PATH ?? '/usr/bin:/bin'}`,
        FAKE_NVIDIA_SMI_DIR: smiDir,
        AGENT_SYSFS_ROOT: sysfs,
      },
    });
  });
  afterAll(async () => {
    await agent?.stop();
    if (dataDir) AgentProcess.removeDataDir(dataDir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('/v1/info reports each GPU as detected, fresh at every call', async () => {
    const h100 = await info();
    expect(h100.kind).toBe('gpu');
    expect(h100.gpus).toEqual([{ model: 'h100', count: 1, free: 1, mig_profiles: [] }]);
    expect(h100.gpu_devices).toEqual([
      expect.objectContaining({
        model: 'h100',
        name: 'NVIDIA H100 80GB HBM3',
        memory_mb: 81559,
        pci_address: '0000:18:00.0',
        driver: 'nvidia',
        iommu_group: 12,
        iommu_group_devices: ['0000:18:00.0', '0000:18:00.1'],
        mig_mode: 'disabled',
        held_by: null,
      }),
    ]);
    expect(h100.gpu_status).toMatchObject({ state: 'ok', driver_version: '550.54.15' });
    // The test agent runs under TCG and the fake tree has no vfio-pci driver.
    expect(h100.gpu_status?.passthrough).toEqual({
      available: false,
      missing: [
        expect.stringMatching(/^KVM \(VMs here run under tcg/),
        'the vfio-pci driver (not loaded: modprobe vfio-pci)',
      ],
    });

    useSmiCase(smiDir, 'h100-mig');
    const mig = await info();
    expect(mig.gpus).toEqual([
      { model: 'h100', count: 0, free: 0, mig_profiles: expect.arrayContaining(['1g.10gb', '7g.80gb']) },
    ]);
    expect(mig.gpu_devices[0]?.mig_instances).toHaveLength(7);

    for (const [name, model] of [
      ['h200', 'h200'],
      ['l40s', 'l40s'],
    ] as const) {
      useSmiCase(smiDir, name);
      expect((await info()).gpus.map((g) => g.model)).toEqual([model]);
    }
  });

  test('no driver, a driver/library mismatch and garbage output are a clear status, never a crash', async () => {
    for (const [name, state, detail] of [
      ['no-driver', 'no_driver', /^NVIDIA driver not loaded/],
      ['mismatch', 'error', /^NVIDIA driver\/library version mismatch/],
      ['garbage', 'error', /^nvidia-smi printed what cannot be parsed/],
    ] as const) {
      useSmiCase(smiDir, name);
      const r = await agent.request<AgentInfo>('GET', '/v1/info');
      expect(r.status).toBe(200);
      expect(r.body.gpu_devices).toEqual([]);
      expect(r.body.gpus).toEqual([]);
      expect(r.body.gpu_status?.state).toBe(state);
      expect(r.body.gpu_status?.detail).toMatch(detail);
    }
  });

  test('a GPU create is refused naming what passthrough lacks; a MIG profile with the MIG reason', async () => {
    useSmiCase(smiDir, 'h100');
    const whole = await createGpuVm({ model: 'h100', count: 1 });
    expect(whole.status).toBe(400);
    expect(whole.body.error.message).toMatch(
      /^this host detects GPUs but cannot pass them to a VM: missing KVM .*; the vfio-pci driver/,
    );
    expect(whole.body.error.details).toMatchObject({ reason: 'no_passthrough' });
    const mig = await createGpuVm({ model: 'h100', count: 1, mig: '1g.10gb' });
    expect(mig.status).toBe(400);
    expect(mig.body.error.message).toMatch(/MIG slices cannot be passed to a VM/);
    // Nothing was left behind: no VM, the GPU unheld.
    expect((await agent.request<{ vms: unknown[] }>('GET', '/v1/vms')).body.vms).toEqual([]);
    expect((await info()).gpus[0]?.free).toBe(1);
  });
});
