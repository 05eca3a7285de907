import type { Accelerator } from './accel.js';

/** Everything the QEMU command line of one VM depends on. */
export interface QemuArgs {
  readonly accelerator: Accelerator;
  readonly cpus: number;
  readonly ramMb: number;
  readonly kernel: string;
  readonly initramfs: string;
  /** Kernel command line; a live restore must reuse the one the snapshot was taken with. */
  readonly append: string;
  readonly disk: string;
  /**
   * Where QEMU opens the overlay's backing image instead of the path in its header (a VM running as
   * its own uid gets the image as an inherited descriptor, `/proc/self/fd/N`); unset: the header's.
   */
  readonly backingFile?: string;
  readonly dir: string;
  /** guest port -> host port, bound on `bindAddress`. */
  readonly forwards: readonly { readonly guest: number; readonly host: number }[];
  readonly bindAddress: string;
  /** The NIC's MAC address (a live restore passes the new VM's; the guest is told after resume). */
  readonly mac?: string;
  /**
   * The image files of the manifest's services, in manifest order: one read-only virtio-blk disk
   * each (serial `svc<i>`), after every other device, so a VM without services has the devices it
   * always had and a live restore (same manifest) gets the same devices in the same order.
   */
  readonly serviceDisks?: readonly string[];
  /**
   * Set for a live restore and a resume in place: QEMU waits for the migration stream on this
   * socket, which the agent feeds (a snapshot's `state.bin`, or the decrypted saved state).
   */
  readonly incomingSocket?: string;
}

/** The kernel command line of a new VM. */
export function kernelCmdline(vmId: string, tscKhz: number | undefined): string {
  return [
    'console=ttyS0',
    'quiet',
    'panic=-1',
    ...(tscKhz ? [`tsc_early_khz=${tscKhz}`] : []),
    `orch.hostname=${vmId}`,
  ].join(' ');
}

/**
 * The QEMU argv of a VM: `-M microvm` (no PCI, no firmware: ~1.7 s to a shell under TCG vs ~2.0 s
 * for q35, notes/qemu-microvm.md), virtio-mmio devices in a fixed order (a live restore needs the
 * same devices in the same order), serial console, QMP, user-mode networking with one hostfwd per
 * exposed port, the guest agent's virtio-serial port `agent0` and the startup log port `log0`
 * (a socket the agent reads into the bounded `startup.log`, startup-log.ts; while nobody reads it
 * the guest's writes block, so a flood is throttled, never buffered).
 */
export function qemuArgv(a: QemuArgs): string[] {
  const hostfwd = a.forwards.map((f) => `,hostfwd=tcp:${a.bindAddress}:${f.host}-:${f.guest}`).join('');
  return [
    '-name',
    'orch-vm',
    '-M',
    'microvm',
    '-accel',
    a.accelerator,
    ...(a.accelerator === 'kvm' ? ['-cpu', 'host'] : []),
    '-smp',
    String(a.cpus),
    '-m',
    String(a.ramMb),
    '-nodefaults',
    '-no-user-config',
    '-nographic',
    '-kernel',
    a.kernel,
    '-initrd',
    a.initramfs,
    '-append',
    a.append,
    '-chardev',
    `socket,id=con,path=${a.dir}/console.sock,server=on,wait=off`,
    '-serial',
    'chardev:con',
    '-drive',
    `id=root,file=${a.disk},format=qcow2,if=none,cache=writeback${a.backingFile ? `,backing.file.filename=${a.backingFile}` : ''}`,
    '-device',
    'virtio-blk-device,drive=root',
    '-netdev',
    `user,id=n0${hostfwd}`,
    '-device',
    `virtio-net-device,netdev=n0${a.mac ? `,mac=${a.mac}` : ''}`,
    '-chardev',
    `socket,id=agent,path=${a.dir}/agent.sock,server=on,wait=off`,
    '-device',
    'virtio-serial-device',
    '-device',
    'virtserialport,chardev=agent,name=agent0',
    '-chardev',
    `socket,id=log,path=${a.dir}/log.sock,server=on,wait=off`,
    '-device',
    'virtserialport,chardev=log,name=log0',
    '-device',
    'virtio-rng-device',
    ...(a.serviceDisks ?? []).flatMap((file, i) => [
      '-drive',
      `id=svc${i},file=${file},format=raw,if=none,readonly=on`,
      '-device',
      `virtio-blk-device,drive=svc${i},serial=svc${i}`,
    ]),
    '-qmp',
    `unix:${a.dir}/qmp.sock,server=on,wait=off`,
    ...(a.incomingSocket ? ['-incoming', `unix:${a.incomingSocket}`] : []),
  ];
}
