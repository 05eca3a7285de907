import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IMAGE_NAME } from '@orch/protocol';
import { AgentError } from '../errors.js';
import { run } from '../util/run.js';
import { guestRuntimeStamp, installGuestRuntime } from './guest-runtime.js';
import type { Layout } from './layout.js';

/** `images/<name>/image.json`. */
export interface ImageMeta {
  readonly name: string;
  readonly description: string;
  readonly created_at: string;
  /** Filesystem size of rootfs.img in bytes (sparse on the host). */
  readonly size_bytes: number;
  /** Which guest runtime (init, agent, busybox) the image carries. */
  readonly runtime_stamp: string;
}

/**
 * Named base images: raw ext4 files built with `mkfs.ext4 -d` (no mounts, no loop devices). Every
 * image carries the guest runtime under `/orch`. VMs boot thin qcow2 overlays on them.
 */
export class ImageStore {
  constructor(private readonly layout: Layout) {}

  /** Names of the images that are complete on disk, sorted. */
  async list(): Promise<string[]> {
    const names = await readdir(this.layout.imagesDir).catch(() => [] as string[]);
    return names
      .filter((n) => IMAGE_NAME.test(n) && existsSync(join(this.layout.imageDir(n), 'image.json')))
      .sort();
  }

  /** `image.json` of image `name`, if it is complete; a name that cannot be an image is `invalid_argument`. */
  async meta(name: string): Promise<ImageMeta | undefined> {
    const dir = this.layout.imageDir(name);
    try {
      return JSON.parse(await readFile(join(dir, 'image.json'), 'utf8')) as ImageMeta;
    } catch {
      return undefined;
    }
  }

  /** The rootfs file of an image; an unknown name is a clear `invalid_argument`. */
  async resolve(name: string): Promise<string> {
    if (!(await this.meta(name))) {
      const available = await this.list();
      throw AgentError.invalid(
        `unknown image ${JSON.stringify(name)}; this host has: ${available.join(', ') || 'none (run orch-agent setup)'}`,
        { image: name, available },
      );
    }
    return this.layout.imageFile(name);
  }

  /**
   * Builds image `name` from a directory that `fill` populates: the guest runtime is added, the
   * filesystem sized to its content plus headroom, and the image replaced atomically.
   */
  async build(name: string, description: string, fill: (root: string) => Promise<void>): Promise<void> {
    this.layout.checkImageName(name, 'NAME');
    await mkdir(this.layout.imagesDir, { recursive: true });
    const tmp = await mkdtemp(join(tmpdir(), 'orch-agent-image-'));
    try {
      const root = join(tmp, 'root');
      await mkdir(root);
      await fill(root);
      await installGuestRuntime(root);
      const used = Number((await run(['du', '-s', '--block-size=1', root])).split(/\s/)[0]);
      const sizeMiB = Math.max(512, Math.ceil((used * 1.3) / 2 ** 20) + 256);
      const staging = join(this.layout.imagesDir, `.${name}.building`);
      await rm(staging, { recursive: true, force: true });
      await mkdir(staging);
      await run([
        'mkfs.ext4',
        '-q',
        '-F',
        '-L',
        'orchroot',
        '-d',
        root,
        join(staging, 'rootfs.img'),
        `${sizeMiB}M`,
      ]);
      const meta: ImageMeta = {
        name,
        description,
        created_at: new Date().toISOString(),
        size_bytes: sizeMiB * 2 ** 20,
        runtime_stamp: await guestRuntimeStamp(),
      };
      await writeFile(join(staging, 'image.json'), `${JSON.stringify(meta, null, 2)}\n`);
      const old = `${this.layout.imageDir(name)}.old`;
      await rm(old, { recursive: true, force: true });
      if (existsSync(this.layout.imageDir(name))) await rename(this.layout.imageDir(name), old);
      await rename(staging, this.layout.imageDir(name));
      await rm(old, { recursive: true, force: true });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  /** `orch-agent image import NAME TARBALL`: a root filesystem tarball (as `docker export` writes) becomes an image. */
  async importTarball(name: string, tarball: string): Promise<void> {
    this.layout.checkImageName(name, 'NAME');
    if (!existsSync(tarball)) throw AgentError.invalid(`no such file: ${tarball}`);
    await this.build(name, `imported from ${tarball}`, async (root) => {
      await run(['tar', '--numeric-owner', '-xpf', tarball, '-C', root]);
    });
  }
}
