/** Numbers a caller sends are bounded where a larger one would break a timer or a date downstream. */
import { describe, expect, it } from 'vitest';
import { MAX_RUNTIME_SECONDS, RestoreSnapshotBody, SPEC_LIMITS, VmSpec } from './index.js';

const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 };

describe('max_runtime_seconds', () => {
  it('accepts up to 365 days', () => {
    expect(VmSpec.safeParse({ ...spec, max_runtime_seconds: MAX_RUNTIME_SECONDS }).success).toBe(true);
    expect(RestoreSnapshotBody.safeParse({ max_runtime_seconds: MAX_RUNTIME_SECONDS }).success).toBe(true);
  });

  it('refuses more (an expiry date beyond what Date can hold used to answer 500)', () => {
    for (const v of [MAX_RUNTIME_SECONDS + 1, 1e13, Number.MAX_SAFE_INTEGER]) {
      const parsed = VmSpec.safeParse({ ...spec, max_runtime_seconds: v });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(['max_runtime_seconds']);
      expect(RestoreSnapshotBody.safeParse({ max_runtime_seconds: v }).success).toBe(false);
    }
  });
});

describe('gpu.count', () => {
  const gpu = (count: number) => ({ ...spec, gpu: { model: 'h100', count } });

  it('is 1..64, the bound orch compile checks too (SPEC_LIMITS)', () => {
    expect(SPEC_LIMITS.gpuCount).toEqual({ min: 1, max: 64 });
    expect(VmSpec.safeParse(gpu(64)).success).toBe(true);
    for (const count of [0, 65, 1e9]) {
      const parsed = VmSpec.safeParse(gpu(count));
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(['gpu', 'count']);
    }
  });
});
