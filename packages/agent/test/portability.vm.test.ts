import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, qemuAvailable, vmRequest } from './agent-process.js';

/**
 * A live artifact resumes only where it can (agent README, "Snapshots travel"): another
 * accelerator is `400`, another QEMU version or guest kernel `409`, each with `details.reason:
 * not_portable`, refused before QEMU starts (no VM boots in this suite: the artifacts are
 * fabricated; the agent runs TCG and one artifact says it was taken under KVM).
 */
describe.skipIf(!qemuAvailable())('live artifacts resume only where they are portable', () => {
  let agent: AgentProcess;
  let dir: string;
  let kernel: string;
  const fabricate = (id: string, over: Record<string, unknown>) => {
    const snap = join(dir, 'snapshots', id);
    mkdirSync(snap, { recursive: true });
    const disk = randomBytes(4096);
    const state = randomBytes(4096);
    writeFileSync(join(snap, 'disk.qcow2'), disk);
    writeFileSync(join(snap, 'state.bin'), state);
    writeFileSync(
      join(snap, 'snapshot.json'),
      JSON.stringify({
        snapshot_id: id,
        vm_id: 'env_src',
        kind: 'live',
        size_bytes: 8192,
        digest: createHash('sha256').update(disk).digest('hex'),
        state_digest: createHash('sha256').update(state).digest('hex'),
        arch: 'amd64',
        created_at: new Date().toISOString(),
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 },
        append: 'console=ttyS0',
        kernel,
        accelerator: 'tcg',
        ...over,
      }),
    );
  };

  beforeAll(async () => {
    dir = AgentProcess.makeDataDir();
    kernel = (JSON.parse(readFileSync(join(dir, 'kernel', 'kernel.json'), 'utf8')) as { kernel: string })
      .kernel;
    agent = await AgentProcess.start({ dataDir: dir });
  }, 300_000);

  afterAll(async () => {
    await agent?.stop();
    if (dir) AgentProcess.removeDataDir(dir);
  });

  test('another accelerator 400, another QEMU version or kernel 409, nothing started', async () => {
    fabricate('snap_kvm', { accelerator: 'kvm' });
    fabricate('snap_qemu', { qemu_version: 'QEMU emulator version 0.1.0' });
    fabricate('snap_kernel', { kernel: '/elsewhere/kernel/vmlinux-9.9.9-other' });
    const cases = [
      ['snap_kvm', 400, /taken under kvm; this host runs tcg/],
      ['snap_qemu', 409, /QEMU emulator version 0\.1\.0.*cannot resume here/],
      ['snap_kernel', 409, /guest kernel vmlinux-9\.9\.9-other/],
    ] as const;
    for (const [id, status, message] of cases) {
      const r = await agent.request<{ error: { message: string; details: { reason: string } } }>(
        'POST',
        '/v1/vms',
        vmRequest(`vm-${id.replace('snap_', '')}`, { restore_snapshot_id: id }),
      );
      expect(r.status, id).toBe(status);
      expect(r.body.error.message).toMatch(message);
      expect(r.body.error.details.reason).toBe('not_portable');
    }
    expect((await agent.request<{ vms: unknown[] }>('GET', '/v1/vms')).body.vms).toEqual([]);
  });
});
