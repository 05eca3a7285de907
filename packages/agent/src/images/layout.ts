import { join, resolve } from 'node:path';

/**
 * Where everything lives under AGENT_DATA_DIR:
 *
 *   kernel/vmlinux, kernel/initramfs.cpio, kernel/kernel.json   guest kernel and initramfs (setup)
 *   images/<name>/rootfs.img, images/<name>/image.json          named base images (raw ext4)
 *   vms/<id>/disk.qcow2, vm.json, *.sock, startup.log            one directory per VM
 *   snapshots/<id>/disk.qcow2, state.bin?, snapshot.json         one directory per snapshot
 *   accel.json                                                   cached accelerator probe verdict
 */
export class Layout {
  readonly root: string;
  constructor(dataDir: string) {
    this.root = resolve(dataDir);
  }
  get kernelDir(): string {
    return join(this.root, 'kernel');
  }
  get vmlinux(): string {
    return join(this.kernelDir, 'vmlinux');
  }
  get initramfs(): string {
    return join(this.kernelDir, 'initramfs.cpio');
  }
  get kernelMeta(): string {
    return join(this.kernelDir, 'kernel.json');
  }
  get imagesDir(): string {
    return join(this.root, 'images');
  }
  imageDir(name: string): string {
    return join(this.imagesDir, name);
  }
  imageFile(name: string): string {
    return join(this.imageDir(name), 'rootfs.img');
  }
  get vmsDir(): string {
    return join(this.root, 'vms');
  }
  vmDir(id: string): string {
    return join(this.vmsDir, id);
  }
  get snapshotsDir(): string {
    return join(this.root, 'snapshots');
  }
  snapshotDir(id: string): string {
    return join(this.snapshotsDir, id);
  }
  get accelVerdict(): string {
    return join(this.root, 'accel.json');
  }
}

/** Image names: what `spec.image` may say. */
export const IMAGE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** The image booted when the spec names none. */
export const DEFAULT_IMAGE = 'busybox';
