// Raw qemu-system-x86_64 with the agent's machine, kernel command line and devices (in its order),
// booting a thin overlay on an image until the guest agent's hello on its virtio-serial socket.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const tscKhz = Math.round(
  Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))[1]) * 1000,
);

/** Milliseconds from QEMU's start to the guest agent's `H` line. */
export async function rawQemuBoot(assets, image, tag) {
  const kernel = JSON.parse(readFileSync(join(assets, 'kernel/kernel.json'), 'utf8'));
  const dir = mkdtempSync(join(tmpdir(), 'raw-qemu-'));
  const disk = join(dir, 'disk.qcow2');
  const base = join(assets, 'images', image, 'rootfs.img');
  await new Promise((r, j) =>
    spawn('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', base, disk, '1G']).once(
      'exit',
      (c) => (c === 0 ? r() : j(new Error('qemu-img failed'))),
    ),
  );
  const t0 = performance.now();
  const qemu = spawn(
    'qemu-system-x86_64',
    [
      ...['-M', 'microvm', '-accel', 'tcg', '-smp', '1', '-m', '256'],
      ...['-nodefaults', '-no-user-config', '-nographic'],
      ...['-kernel', kernel.kernel, '-initrd', join(assets, 'kernel/initramfs.cpio')],
      ...['-append', `console=ttyS0 quiet panic=-1 tsc_early_khz=${tscKhz} orch.hostname=raw${tag}`],
      ...['-chardev', `socket,id=con,path=${dir}/console.sock,server=on,wait=off`, '-serial', 'chardev:con'],
      ...['-drive', `id=root,file=${disk},format=qcow2,if=none,cache=writeback`],
      ...['-device', 'virtio-blk-device,drive=root'],
      ...['-netdev', 'user,id=n0', '-device', 'virtio-net-device,netdev=n0'],
      ...['-chardev', `socket,id=agent,path=${dir}/agent.sock,server=on,wait=off`],
      ...['-device', 'virtio-serial-device', '-device', 'virtserialport,chardev=agent,name=agent0'],
      ...[
        '-chardev',
        `file,id=log,path=${dir}/startup.log`,
        '-device',
        'virtserialport,chardev=log,name=log0',
      ],
      ...['-device', 'virtio-rng-device'],
    ],
    { stdio: 'ignore' },
  );
  let sock;
  for (;;) {
    try {
      sock = await new Promise((r, j) => {
        const s = connect(join(dir, 'agent.sock'));
        s.once('connect', () => r(s));
        s.once('error', j);
      });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  await new Promise((r) => {
    let buf = '';
    sock.on('data', (d) => {
      buf += d;
      if (/^H /m.test(buf)) r();
    });
  });
  const ms = performance.now() - t0;
  sock.destroy();
  qemu.kill('SIGKILL');
  await new Promise((r) => qemu.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
  return ms;
}
