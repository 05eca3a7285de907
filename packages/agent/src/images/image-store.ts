import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type AgentImage, IMAGE_NAME } from '@orch/protocol';
import { AgentError, isDiskFull } from '../errors.js';
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
  /** Where the root filesystem came from: `busybox`, `mmdebstrap:bookworm`, `oci-archive:...`, `docker://...`, `tarball:...`. */
  readonly source?: string;
  /** `sha256:<hex>` of rootfs.img, the artifact VMs boot. */
  readonly digest?: string;
  /** The OCI manifest digest an imported image came from. */
  readonly manifest_digest?: string;
  /** For built images: the recipe the image was made from (a change rebuilds it). */
  readonly recipe_stamp?: string;
  /** The OCI image config an imported image carries (Env, Entrypoint, Cmd, WorkingDir, User). */
  readonly config?: ImageConfig;
}

/** The parts of an OCI image config that decide how its programs run. */
export interface ImageConfig {
  readonly Env?: readonly string[];
  readonly Entrypoint?: readonly string[] | null;
  readonly Cmd?: readonly string[] | null;
  readonly WorkingDir?: string;
  readonly User?: string;
}

/** Extra facts {@link ImageStore.build} records in `image.json`. */
export interface BuildInfo {
  readonly source: string;
  readonly recipe_stamp?: string;
  readonly manifest_digest?: string;
  readonly config?: ImageConfig;
}

/** Free space the data dir must keep beyond an image being written. */
const IMAGE_FREE_MARGIN = 64 * 2 ** 20;

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

  /** Every complete image with its size, digest and source, as `/v1/info` lists them. */
  async describe(): Promise<AgentImage[]> {
    const out: AgentImage[] = [];
    for (const name of await this.list()) {
      const m = await this.meta(name);
      if (!m) continue;
      out.push({
        name,
        size_bytes: m.size_bytes,
        digest: m.digest ?? null,
        source: m.source ?? (name === 'busybox' ? 'busybox' : 'unknown'),
        created_at: m.created_at,
      });
    }
    return out;
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
   * filesystem sized to its content plus headroom, its digest taken, and the image replaced
   * atomically. On any failure nothing is left behind (the old image, if any, stays); a full disk
   * is `unavailable` with `reason: disk_full`. Every file is written inside a temp directory of
   * this build's own, so two builds of one name at once (two `setup`s, an import beside a pull)
   * cannot mix their files: the last to finish is the image.
   */
  async build(
    name: string,
    description: string,
    fill: (root: string) => Promise<void>,
    info: BuildInfo = { source: name },
  ): Promise<void> {
    this.layout.checkImageName(name, 'NAME');
    await mkdir(this.layout.imagesDir, { recursive: true });
    // Work on the data dir's own filesystem: the free-space check then covers the tree too.
    const tmp = await mkdtemp(join(this.layout.imagesDir, '.tmp-'));
    const staging = join(tmp, 'image');
    try {
      const root = join(tmp, 'root');
      await mkdir(root);
      await fill(root);
      await installGuestRuntime(root);
      if (info.config?.Env) await writeFile(join(root, 'orch', 'image.env'), imageEnvFile(info.config.Env));
      const used = Number((await run(['du', '-s', '--block-size=1', root])).split(/\s/)[0]);
      const sizeMiB = Math.max(512, Math.ceil((used * 1.3) / 2 ** 20) + 256);
      const fs = await statfs(this.layout.imagesDir);
      const free = fs.bavail * fs.bsize;
      if (free < used + IMAGE_FREE_MARGIN) {
        throw AgentError.diskFull(
          `not enough space to write image ${name}: it needs about ${Math.ceil((used + IMAGE_FREE_MARGIN) / 2 ** 20)} MiB, ${Math.floor(free / 2 ** 20)} MiB free in ${this.layout.imagesDir}`,
          { name, needed_bytes: used + IMAGE_FREE_MARGIN, free_bytes: free },
        );
      }
      await mkdir(staging);
      const file = join(staging, 'rootfs.img');
      await run(['mkfs.ext4', '-q', '-F', '-L', 'orchroot', '-d', root, file, `${sizeMiB}M`]);
      const digest = `sha256:${(await run(['sha256sum', file])).split(' ')[0]}`;
      const meta: ImageMeta = {
        name,
        description,
        created_at: new Date().toISOString(),
        size_bytes: (await stat(file)).size,
        runtime_stamp: await guestRuntimeStamp(),
        digest,
        ...info,
      };
      await writeFile(join(staging, 'image.json'), `${JSON.stringify(meta, null, 2)}\n`);
      await replaceDir(staging, this.layout.imageDir(name), join(tmp, 'old'));
    } catch (err) {
      if (isDiskFull(err)) {
        throw AgentError.diskFull(
          `no space left on the device of ${this.layout.imagesDir} while writing image ${name}`,
          {
            name,
          },
        );
      }
      throw err;
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
}

/**
 * Puts directory `from` at `to`, moving what was there to `aside` (removed with the caller's temp
 * directory). A directory cannot be renamed over a non-empty one, so the old one goes first; when
 * another build puts its own at `to` in between, that one goes aside too and this one is the image.
 */
async function replaceDir(from: string, to: string, aside: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await rm(aside, { recursive: true, force: true });
    await rename(to, aside).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    try {
      await rename(from, to);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (attempt >= 5 || (code !== 'ENOTEMPTY' && code !== 'EEXIST')) throw err;
    }
  }
}

/**
 * `/orch/image.env`: an OCI image's `Env` as `export NAME='value'` lines, sourced by the guest's
 * init so exec, the startup script and the console see the image's PATH and variables.
 */
export function imageEnvFile(env: readonly string[]): string {
  const lines: string[] = [];
  for (const entry of env) {
    const eq = entry.indexOf('=');
    const key = eq > 0 ? entry.slice(0, eq) : '';
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) continue;
    lines.push(`export ${key}='${entry.slice(eq + 1).replace(/'/g, "'\\''")}'`);
  }
  return `${lines.join('\n')}\n`;
}
