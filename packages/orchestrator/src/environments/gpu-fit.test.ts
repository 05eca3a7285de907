import { MIG_VM_REFUSAL } from '@orch/protocol';
import { describe, expect, test } from 'vitest';
import { gpuDevice, gpuStatus, migH100 } from '../../test/gpu-hosts.js';
import { gpuFit, gpuNeverFits, gpuNotNow, passthroughRefusal } from './gpu-fit.js';

const twoH100 = {
  gpu_devices: [gpuDevice('0000:18:00.0'), gpuDevice('0000:19:00.0')],
  gpu_status: gpuStatus(),
};
const mig = { gpu_devices: [migH100('0000:3b:00.0')], gpu_status: gpuStatus() };

describe('gpuFit: devices a request matches, over host facts and held devices', () => {
  test('whole GPUs: fits, does not fit now (held), never fits (model, count, MIG mode, no IOMMU group)', () => {
    expect(gpuFit(twoH100, {}, { model: 'h100', count: 2 })).toEqual({ ok: true });
    expect(gpuFit(twoH100, { h100: 1 }, { model: 'h100', count: 1 })).toEqual({ ok: true });
    expect(gpuFit(twoH100, { h100: 1 }, { model: 'h100', count: 2 })).toEqual({
      ok: false,
      when: 'now',
      reason: '1 of 2 h100 GPUs free',
    });
    expect(gpuFit(twoH100, {}, { model: 'l40s', count: 1 })).toEqual({
      ok: false,
      when: 'never',
      reason: 'no l40s GPU (it has 2x h100)',
    });
    expect(gpuFit(twoH100, {}, { model: 'h100', count: 3 })).toMatchObject({
      when: 'never',
      reason: '2 whole h100 GPU(s) can be passed through, 3 asked',
    });
    const mixed = {
      gpu_devices: [migH100('0000:3b:00.0'), gpuDevice('0000:18:00.0', { iommu_group: null })],
      gpu_status: gpuStatus(),
    };
    expect(gpuFit(mixed, {}, { model: 'h100', count: 1 })).toMatchObject({
      when: 'never',
      reason: '0 whole h100 GPU(s) can be passed through, 1 asked (1 in MIG mode, 1 without an IOMMU group)',
    });
  });

  test('MIG profiles: offered and free, all held, not offered, MIG mode off', () => {
    expect(gpuFit(mig, {}, { model: 'h100', count: 1, mig: '1g.10gb' })).toEqual({ ok: true });
    expect(gpuFit(mig, { 'h100/1g.10gb': 7 }, { model: 'h100', count: 1, mig: '1g.10gb' })).toEqual({
      ok: false,
      when: 'now',
      reason: '0 of 1 h100 MIG 1g.10gb instances free',
    });
    expect(gpuFit(mig, {}, { model: 'h100', count: 1, mig: '7g.80gb' })).toEqual({
      ok: false,
      when: 'never',
      reason: 'MIG profile 7g.80gb is not offered by its h100 GPUs (offered: 1g.10gb, 3g.40gb)',
    });
    expect(gpuFit(mig, {}, { model: 'h100', count: 1, mig: '3g.40gb' })).toMatchObject({
      when: 'never',
      reason: expect.stringMatching(/^no h100 MIG 3g\.40gb instance is created/),
    });
    expect(gpuFit(twoH100, {}, { model: 'h100', count: 1, mig: '1g.10gb' })).toMatchObject({
      reason: 'MIG profile 1g.10gb is not offered by its h100 GPUs (MIG mode is off)',
    });
  });

  test('detection: no driver or a failing nvidia-smi is "not now" with the detail; no GPU or no detection is "never"', () => {
    const noDriver = {
      gpu_devices: [],
      gpu_status: gpuStatus({ state: 'no_driver', detail: 'NVIDIA driver not loaded' }),
    };
    expect(gpuFit(noDriver, {}, { model: 'h100', count: 1 })).toEqual({
      ok: false,
      when: 'now',
      reason: 'GPU detection failed: NVIDIA driver not loaded',
    });
    expect(gpuFit({ gpu_devices: [], gpu_status: null }, {}, { model: 'h100', count: 1 })).toMatchObject({
      when: 'never',
    });
    expect(
      gpuFit(
        { gpu_devices: [], gpu_status: gpuStatus({ state: 'no_gpu', detail: 'no NVIDIA GPU' }) },
        {},
        { model: 'h100', count: 1 },
      ),
    ).toEqual({ ok: false, when: 'never', reason: 'no GPU (no NVIDIA GPU)' });
  });
});

describe('passthrough and the scheduler hooks', () => {
  test('MIG is refused for VMs with the reason; a host without KVM/IOMMU/VFIO names what is missing', () => {
    expect(passthroughRefusal(mig, { model: 'h100', count: 1, mig: '1g.10gb' })).toBe(MIG_VM_REFUSAL);
    const noPassthrough = {
      ...twoH100,
      gpu_status: gpuStatus({ passthrough: { available: false, missing: ['KVM (tcg)', 'an IOMMU'] } }),
    };
    expect(gpuNeverFits(noPassthrough, { model: 'h100', count: 1 })).toBe(
      'detects GPUs but cannot pass them to a VM: missing KVM (tcg); an IOMMU',
    );
    // The device reason comes first: a profile that is not offered says so, not the MIG refusal.
    expect(gpuNeverFits(mig, { model: 'h100', count: 1, mig: '7g.80gb' })).toMatch(
      /^MIG profile 7g\.80gb is not offered/,
    );
    expect(gpuNeverFits(mig, { model: 'h100', count: 1, mig: '1g.10gb' })).toBe(MIG_VM_REFUSAL);
    expect(gpuNeverFits(twoH100, { model: 'h100', count: 1 })).toBeUndefined();
    expect(gpuNotNow(twoH100, { h100: 2 }, { model: 'h100', count: 1 })).toBe('0 of 1 h100 GPUs free');
    expect(gpuNotNow(twoH100, {}, { model: 'h100', count: 1 })).toBeUndefined();
  });
});
