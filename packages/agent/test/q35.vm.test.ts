import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { toQ35 } from '../src/gpu/passthrough-argv.js';
import { hostTscKhz } from '../src/vm/accel.js';
import { GuestChannel } from '../src/vm/guest-channel.js';
import { kernelCmdline, qemuArgv } from '../src/vm/qemu-argv.js';
import { ensureGuestAssets, qemuAvailable } from './agent-process.js';

/**
 * A GPU VM is a q35 machine (VFIO devices are PCI devices; microvm has no PCI bus). This machine has
 * no GPU and no working KVM, so the VFIO part cannot run here; what can: the q35 form of a VM's argv
 * (`toQ35`, the first step of `withGpuPassthrough`) boots the guest under TCG, and the guest finds its
 * root disk, its guest-agent port and its devices on PCI (the initramfs loads `virtio_pci`). One boot,
 * ~20-40 s under TCG on the shared machine.
 */
const hasQemu = qemuAvailable();
const dir = mkdtempSync(join(tmpdir(), 'orch-q35-'));
let qemu: ChildProcess | undefined;
afterAll(() => {
  qemu?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

test.skipIf(!hasQemu)(
  'the q35 form of a VM boots: root disk, guest agent and virtio devices on PCI',
  async () => {
    const assets = ensureGuestAssets();
    const disk = join(dir, 'disk.qcow2');
    execFileSync('qemu-img', [
      'create',
      '-q',
      '-f',
      'qcow2',
      '-F',
      'raw',
      '-b',
      join(assets, 'images/busybox/rootfs.img'),
      disk,
      '1G',
    ]);
    const argv = toQ35(
      qemuArgv({
        accelerator: 'tcg',
        cpus: 1,
        ramMb: 512,
        kernel: join(assets, 'kernel/vmlinux'),
        initramfs: join(assets, 'kernel/initramfs.cpio'),
        append: kernelCmdline('q35test', await hostTscKhz()),
        disk,
        dir,
        forwards: [],
        bindAddress: '127.0.0.1',
      }),
    );
    expect(argv[argv.indexOf('-M') + 1]).toBe('q35');
    let stderr = '';
    qemu = spawn('qemu-system-x86_64', argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    qemu.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
    const deadline = Date.now() + 240_000;
    const channel = await GuestChannel.connect(join(dir, 'agent.sock'), deadline);
    await channel
      .waitHello(deadline, () => qemu?.exitCode === null)
      .catch((err: Error) => {
        throw new Error(`${err.message}\nQEMU: ${stderr}`);
      });
    const r = await channel.exec(
      'for d in /sys/bus/pci/devices/*; do echo "$(cat $d/vendor):$(cat $d/device)"; done; grep -c " /$" /proc/mounts; cat /sys/block/vda/size',
      Buffer.alloc(0),
      60,
      1 << 20,
    );
    const out = r.stdout.toString().trim().split('\n');
    // virtio-blk, virtio-net, virtio-serial and virtio-rng on PCI (0x1af4: the virtio vendor), and
    // the q35 host bridge (0x8086:0x29c0).
    const pci = out.filter((l) => l.includes(':'));
    expect(pci).toContain('0x8086:0x29c0');
    expect(pci.filter((l) => l.startsWith('0x1af4:')).length).toBeGreaterThanOrEqual(4);
    // The root filesystem is the 1 GiB disk (2097152 sectors).
    expect(out.at(-1)).toBe('2097152');
    channel.close();
  },
  300_000,
);
