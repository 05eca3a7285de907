import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { AGENT_ID, ID_RULES, IMAGE_NAME } from '@orch/protocol';
import { AgentError } from '../errors.js';

/**
 * Where everything lives under AGENT_DATA_DIR, and the one place that turns ids into paths:
 *
 *   kernel/vmlinux, kernel/initramfs.cpio, kernel/kernel.json   guest kernel and initramfs (setup)
 *   images/<name>/rootfs.img, images/<name>/image.json          named base images (raw ext4)
 *   vms/<id>/disk.qcow2, vm.json, *.sock, startup.log            one directory per VM
 *   snapshots/<id>/disk.qcow2, state.bin?, snapshot.json         one directory per snapshot
 *   accel.json                                                   cached accelerator probe verdict
 *
 * Every VM id, snapshot id and image name is checked against its pattern of `@orch/protocol`
 * (`AGENT_ID`, `IMAGE_NAME`) before it becomes part of a path, and the resolved path is checked to
 * stay directly inside its directory: a bad id is a `400 invalid_argument` and touches nothing.
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
  /** `images/<name>`; `name` must match `IMAGE_NAME`. */
  imageDir(name: string): string {
    return child(this.imagesDir, this.checkImageName(name));
  }
  imageFile(name: string): string {
    return join(this.imageDir(name), 'rootfs.img');
  }
  get vmsDir(): string {
    return join(this.root, 'vms');
  }
  /** `vms/<id>`; `id` must match `AGENT_ID`. */
  vmDir(id: string): string {
    return child(this.vmsDir, this.checkVmId(id));
  }
  get snapshotsDir(): string {
    return join(this.root, 'snapshots');
  }
  /** `snapshots/<id>`; `id` must match `AGENT_ID`. */
  snapshotDir(id: string): string {
    return child(this.snapshotsDir, this.checkSnapshotId(id));
  }
  get accelVerdict(): string {
    return join(this.root, 'accel.json');
  }

  /** Whether `id` can name a VM (or a snapshot). */
  isVmId(id: string): boolean {
    return AGENT_ID.test(id);
  }

  /** Returns `id` if it can name a VM; otherwise throws `invalid_argument` naming `field`. */
  checkVmId(id: string, field = 'id'): string {
    return check(id, AGENT_ID, 'VM id', ID_RULES.agentId, field);
  }

  /** Returns `id` if it can name a snapshot; otherwise throws `invalid_argument` naming `field`. */
  checkSnapshotId(id: string, field = 'snapshot_id'): string {
    return check(id, AGENT_ID, 'snapshot id', ID_RULES.agentId, field);
  }

  /** Returns `name` if it can name an image; otherwise throws `invalid_argument` naming `field`. */
  checkImageName(name: string, field = 'image'): string {
    return check(name, IMAGE_NAME, 'image name', ID_RULES.imageName, field);
  }
}

/** The image booted when the spec names none. */
export const DEFAULT_IMAGE = 'busybox';

/** Longest part of a refused id quoted back in the error message. */
const QUOTE_MAX = 64;

function check(id: string, pattern: RegExp, what: string, rules: string, field: string): string {
  if (typeof id === 'string' && pattern.test(id)) return id;
  const shown = typeof id === 'string' && id.length > QUOTE_MAX ? `${id.slice(0, QUOTE_MAX)}...` : id;
  throw AgentError.invalid(`${field}: ${JSON.stringify(shown)} is not a valid ${what} (${rules})`, {
    field,
  });
}

/**
 * `dir/name`, resolved, and refused unless it is a direct child of `dir` (defence in depth: a name
 * that passed its pattern always is).
 */
function child(dir: string, name: string): string {
  const path = resolve(dir, name);
  const rel = relative(dir, path);
  if (rel !== name || rel === '' || rel.startsWith('..') || isAbsolute(rel) || rel.includes(sep)) {
    throw AgentError.invalid(`${JSON.stringify(name)} does not name an entry inside ${dir}`);
  }
  return path;
}
