import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chmod,
  copyFile,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { run } from '../util/run.js';
import { DEBIAN_IMAGE, ensureDebianImage } from './debian-image.js';
import { BUSYBOX_RECIPE, guestRuntimeStamp, HOST_BUSYBOX, populateBusyboxRoot } from './guest-runtime.js';
import { GUEST_MODULES, INITRAMFS_INIT } from './guest-scripts.js';
import { ImageStore } from './image-store.js';
import { DEFAULT_IMAGE, Layout } from './layout.js';

/** Debian packages the agent runs on; `setup` installs the missing ones (as root). */
export const DEBIAN_PACKAGES = [
  'qemu-system-x86',
  'qemu-utils',
  'busybox-static',
  'e2fsprogs',
  'lz4',
  'util-linux',
  // debian-12 image (mmdebstrap); OCI import and registry pull (skopeo + umoci).
  'mmdebstrap',
  'skopeo',
  'umoci',
  // crun: the OCI runtime of manifest services, copied into every image's guest runtime.
  'crun',
];

/** The images `setup` knows how to build, and its default selection (`AGENT_IMAGES`). */
export const BUILDABLE_IMAGES = [DEFAULT_IMAGE, DEBIAN_IMAGE] as const;

/** What `kernel/kernel.json` records. */
export interface KernelMeta {
  readonly package: string;
  readonly release: string;
  /** The file QEMU's -kernel boots: an uncompressed vmlinux (PVH) when it could be unpacked. */
  readonly kernel: string;
  /** Hash of the initramfs inputs, so a changed init rebuilds it. */
  readonly initramfs_stamp: string;
  /** The kernel modules kept (GUEST_MODULES and their dependencies); another list unpacks again. */
  readonly modules?: readonly string[];
}

export type Progress = (message: string) => void;

/**
 * `orch-agent setup`: idempotent and cached under AGENT_DATA_DIR. Installs missing Debian packages,
 * fetches the Debian cloud kernel (`apt-get download` + `dpkg -x`), unpacks it to a vmlinux, builds
 * the initramfs (busybox + virtio modules) and the chosen images (`busybox`, `debian-12`).
 *
 * One setup at a time per data dir: a second one waits for the first, then finds its work cached.
 * A setup that is killed leaves nothing a later one trusts: each artifact is written under a temp
 * name, and its record (`kernel.json`, `image.json`) only once it is complete.
 */
export async function runSetup(
  dataDir: string,
  progress: Progress,
  images: readonly string[] = BUILDABLE_IMAGES,
): Promise<void> {
  const layout = new Layout(dataDir);
  await mkdir(layout.root, { recursive: true });
  const unlock = await lockDataDir(layout, progress);
  try {
    await removeAbandonedBuilds(layout);
    await ensureDebianPackages(DEBIAN_PACKAGES, progress);
    const kernel = await ensureKernel(layout, progress);
    await ensureInitramfs(layout, kernel, progress);
    if (images.includes(DEFAULT_IMAGE)) await ensureBusyboxImage(layout, progress);
    if (images.includes(DEBIAN_IMAGE)) {
      await ensureDebianImage(new ImageStore(layout), await guestRuntimeStamp(), progress);
    }
    progress(`ready: kernel ${kernel.release}, images: ${(await new ImageStore(layout).list()).join(', ')}`);
  } finally {
    await unlock();
  }
}

/**
 * Takes the exclusive lock `<data dir>/.setup.lock` and resolves with its release. `flock(1)`
 * (util-linux, an essential package) holds it while its command runs, and the command runs until
 * our end of its stdin closes: on release, or when this process dies however it dies. No lock file
 * is ever stale.
 */
async function lockDataDir(layout: Layout, progress: Progress): Promise<() => Promise<void>> {
  const file = join(layout.root, '.setup.lock');
  const child = spawn('flock', ['--exclusive', file, 'sh', '-c', 'echo locked; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const waiting = setTimeout(
    () => progress(`waiting for another orch-agent setup of ${layout.root} to finish`),
    2_000,
  );
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        if (d.includes('locked')) resolve();
      });
      child.once('close', (code) => reject(new Error(`flock ${file} exited with ${code}: ${stderr.trim()}`)));
    });
  } finally {
    clearTimeout(waiting);
  }
  return async () => {
    child.stdin.end();
    await exited;
  };
}

/**
 * Removes the temp directories of image builds that were killed (an image build works in
 * `images/.tmp-*`, removed when it ends however it fails, unless its process dies). Only those a day
 * old: an import that the agent is running beside this setup has one too.
 */
async function removeAbandonedBuilds(layout: Layout): Promise<void> {
  const cutoff = Date.now() - 24 * 3600_000;
  for (const name of await readdir(layout.imagesDir).catch(() => [] as string[])) {
    if (!name.startsWith('.tmp-')) continue;
    const dir = join(layout.imagesDir, name);
    const st = await stat(dir).catch(() => undefined);
    if (st && st.mtimeMs < cutoff) await rm(dir, { recursive: true, force: true });
  }
}

async function ensureDebianPackages(packages: readonly string[], progress: Progress): Promise<void> {
  const missing: string[] = [];
  for (const p of packages) {
    const status = await run([
      'dpkg-query',
      '-W', // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
      '-f=${Status}',
      p,
    ]).catch(() => '');
    if (!status.includes('install ok installed')) missing.push(p);
  }
  if (missing.length === 0) {
    progress(`debian packages: present (${packages.join(', ')})`);
    return;
  }
  if (process.getuid?.() !== 0) {
    throw new Error(`missing Debian packages ${missing.join(' ')}: run as root, or apt-get install them`);
  }
  progress(`debian packages: installing ${missing.join(' ')}`);
  await run(['apt-get', 'update', '-qq']);
  await run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...missing], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
}

async function readKernelMeta(layout: Layout): Promise<KernelMeta | undefined> {
  try {
    const meta = JSON.parse(await readFile(layout.kernelMeta, 'utf8')) as KernelMeta;
    return existsSync(meta.kernel) ? meta : undefined;
  } catch {
    return undefined;
  }
}

/** The newest `linux-image-6.1.0-*-cloud-amd64` that apt knows. */
async function cloudKernelPackage(): Promise<string> {
  const find = async () => {
    const deps = await run(['apt-cache', 'depends', 'linux-image-cloud-amd64']).catch(() => '');
    const m = /Depends:\s*(linux-image-6\.1\.0-[\w.-]+-cloud-amd64)/.exec(deps);
    if (m) return m[1]!;
    const names = (
      await run(['apt-cache', 'search', '--names-only', '^linux-image-6\\.1\\.0-.*-cloud-amd64$']).catch(
        () => '',
      )
    )
      .split('\n')
      .map((l) => l.split(' ')[0]!)
      .filter((n) => /^linux-image-6\.1\.0-\d+-cloud-amd64$/.test(n))
      .sort((a, b) => Number(/-(\d+)-cloud/.exec(a)![1]) - Number(/-(\d+)-cloud/.exec(b)![1]));
    return names.at(-1);
  };
  let pkg = await find();
  if (!pkg) {
    await run(['apt-get', 'update', '-qq']);
    pkg = await find();
  }
  if (!pkg) throw new Error('no linux-image-6.1.0-*-cloud-amd64 package found by apt (is this Debian 12?)');
  return pkg;
}

async function ensureKernel(layout: Layout, progress: Progress): Promise<KernelMeta> {
  const cached = await readKernelMeta(layout);
  if (
    cached &&
    existsSync(join(layout.kernelDir, 'modroot')) &&
    cached.modules?.join(',') === GUEST_MODULES.join(',')
  ) {
    progress(`kernel: cached (${cached.release})`);
    return cached;
  }
  const pkg = await cloudKernelPackage();
  progress(`kernel: downloading ${pkg}`);
  const tmp = await mkdtemp(join(tmpdir(), 'orch-agent-kernel-'));
  try {
    await chmod(tmp, 0o777); // apt-get download drops privileges to _apt
    await run(['apt-get', 'download', '-qq', pkg], { cwd: tmp });
    const deb = (await readdir(tmp)).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${pkg} wrote no .deb`);
    progress(`kernel: unpacking ${deb}`);
    const x = join(tmp, 'x');
    await run(['dpkg', '-x', join(tmp, deb), x]);
    const release = (await readdir(join(x, 'lib', 'modules')))[0];
    if (!release) throw new Error(`${deb} has no lib/modules`);
    await rm(layout.kernelDir, { recursive: true, force: true });
    await mkdir(layout.kernelDir, { recursive: true });
    // Keep the modules the guest loads and their dependencies (busybox depmod writes modules.dep).
    await run([HOST_BUSYBOX, 'depmod', '-b', x, release]);
    const modDir = join(x, 'lib', 'modules', release);
    const dep = parseModulesDep(await readFile(join(modDir, 'modules.dep'), 'utf8'));
    const wanted = new Set<string>();
    const visit = (name: string) => {
      const entry = [...dep.keys()].find((k) => moduleName(k) === name.replace(/-/g, '_'));
      if (!entry || wanted.has(entry)) return;
      wanted.add(entry);
      for (const d of dep.get(entry) ?? []) visit(moduleName(d));
    };
    for (const m of GUEST_MODULES) visit(m);
    const modroot = join(layout.kernelDir, 'modroot', 'lib', 'modules', release);
    for (const rel of wanted) {
      await mkdir(dirname(join(modroot, rel)), { recursive: true });
      await copyFile(join(modDir, rel), join(modroot, rel));
    }
    await run([HOST_BUSYBOX, 'depmod', '-b', join(layout.kernelDir, 'modroot'), release]);
    // The bzImage payload is LZ4; unpacked, the vmlinux has a PVH note and boots ~0.3 s faster.
    const vmlinuz = join(x, 'boot', `vmlinuz-${release}`);
    let kernel = layout.vmlinux;
    progress('kernel: unpacking vmlinuz to vmlinux');
    if (!(await unpackVmlinux(vmlinuz, layout.vmlinux, tmp))) {
      kernel = join(layout.kernelDir, 'vmlinuz');
      await copyFile(vmlinuz, kernel);
      progress('kernel: could not unpack vmlinux; booting the compressed vmlinuz');
    }
    const meta: KernelMeta = { package: pkg, release, kernel, initramfs_stamp: '', modules: GUEST_MODULES };
    await writeFile(layout.kernelMeta, `${JSON.stringify(meta, null, 2)}\n`);
    progress(`kernel: ${release} ready`);
    return meta;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

function parseModulesDep(text: string): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const [mod, deps] = line.split(':');
    if (!mod) continue;
    map.set(mod.trim(), (deps ?? '').trim().split(/\s+/).filter(Boolean));
  }
  return map;
}

function moduleName(path: string): string {
  return (path.split('/').at(-1) ?? '').replace(/\.ko(\.\w+)?$/, '').replace(/-/g, '_');
}

async function unpackVmlinux(vmlinuz: string, out: string, tmp: string): Promise<boolean> {
  const buf = await readFile(vmlinuz);
  const magic = Buffer.from([0x02, 0x21, 0x4c, 0x18]);
  let offset = buf.indexOf(magic);
  while (offset >= 0) {
    const slice = join(tmp, 'payload.lz4');
    await writeFile(slice, buf.subarray(offset));
    // lz4 stops at the end of the stream and may complain about the trailing bytes.
    await run(['sh', '-c', 'lz4 -dc "$1" > "$2" 2>/dev/null; true', 'sh', slice, out]);
    const head = await readFile(out)
      .then((b) => b.subarray(0, 4))
      .catch(() => Buffer.alloc(0));
    if (head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) return true;
    offset = buf.indexOf(magic, offset + 1);
  }
  await rm(out, { force: true });
  return false;
}

async function ensureInitramfs(layout: Layout, kernel: KernelMeta, progress: Progress): Promise<void> {
  const stamp = createHash('sha256')
    .update(INITRAMFS_INIT)
    .update(GUEST_MODULES.join(','))
    .update(await readFile(HOST_BUSYBOX))
    .update(kernel.release)
    .digest('hex')
    .slice(0, 16);
  if (kernel.initramfs_stamp === stamp && existsSync(layout.initramfs)) {
    progress('initramfs: cached');
    return;
  }
  progress('initramfs: building (busybox + virtio modules)');
  const tmp = await mkdtemp(join(tmpdir(), 'orch-agent-initramfs-'));
  // Written beside the old one under a name of its own, then renamed over it.
  const staged = `${layout.initramfs}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const root = join(tmp, 'root');
    for (const d of ['bin', 'dev', 'proc', 'sys', 'newroot']) await mkdir(join(root, d), { recursive: true });
    await copyFile(HOST_BUSYBOX, join(root, 'bin', 'busybox'));
    await chmod(join(root, 'bin', 'busybox'), 0o755);
    await writeFile(join(root, 'init'), INITRAMFS_INIT, { mode: 0o755 });
    await run(['cp', '-a', join(layout.kernelDir, 'modroot', 'lib'), join(root, 'lib')]);
    await run([
      'sh',
      '-c',
      'cd "$1" && find . | "$2" cpio -o -H newc > "$3" 2>/dev/null',
      'sh',
      root,
      HOST_BUSYBOX,
      staged,
    ]);
    await rename(staged, layout.initramfs);
    await writeFile(layout.kernelMeta, `${JSON.stringify({ ...kernel, initramfs_stamp: stamp }, null, 2)}\n`);
    progress(`initramfs: ${((await stat(layout.initramfs)).size / 1024 / 1024).toFixed(1)} MiB`);
  } finally {
    await rm(staged, { force: true });
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * `setup`'s step for the `busybox` image: cached while the guest runtime and {@link BUSYBOX_RECIPE}
 * are those it was built with; otherwise built (a few seconds).
 */
export async function ensureBusyboxImage(layout: Layout, progress: Progress): Promise<void> {
  const store = new ImageStore(layout);
  const stamp = await guestRuntimeStamp();
  const existing = await store.meta(DEFAULT_IMAGE);
  if (existing?.runtime_stamp === stamp && existing.recipe_stamp === BUSYBOX_RECIPE) {
    progress(`image ${DEFAULT_IMAGE}: cached`);
    return;
  }
  progress(`image ${DEFAULT_IMAGE}: building (busybox root + guest agent)`);
  await store.build(DEFAULT_IMAGE, 'busybox-static root built by orch-agent setup', populateBusyboxRoot, {
    source: DEFAULT_IMAGE,
    recipe_stamp: BUSYBOX_RECIPE,
  });
  progress(`image ${DEFAULT_IMAGE}: ready`);
}
