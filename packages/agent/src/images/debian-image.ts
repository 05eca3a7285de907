import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CommandError } from '../util/run.js';
import type { ImageStore } from './image-store.js';

/** The name of the Debian image `orch-agent setup` builds. */
export const DEBIAN_IMAGE = 'debian-12';

/** The Debian suite of {@link DEBIAN_IMAGE}. */
export const DEBIAN_SUITE = 'bookworm';

/**
 * What a user expects in a dev sandbox, on top of mmdebstrap's `minbase` variant (essential
 * packages + apt): TLS roots, curl, Python, `ip`, `ps`, a pager and git.
 */
export const DEBIAN_INCLUDE = ['ca-certificates', 'curl', 'python3', 'iproute2', 'procps', 'less', 'git'];

/**
 * mmdebstrap's options for {@link DEBIAN_IMAGE}: documentation and translations are not needed in a
 * sandbox and are a third of the size.
 */
const DEBIAN_OPTIONS = [
  '--mode=root',
  '--variant=minbase',
  `--include=${DEBIAN_INCLUDE.join(',')}`,
  '--dpkgopt=path-exclude=/usr/share/man/*',
  '--dpkgopt=path-exclude=/usr/share/locale/*',
  '--dpkgopt=path-include=/usr/share/locale/locale.alias',
  '--dpkgopt=path-exclude=/usr/share/doc/*',
  '--dpkgopt=path-include=/usr/share/doc/*/copyright',
];

/**
 * Revision of what {@link populateDebianRoot} does after mmdebstrap: bump it with any change there,
 * and the next setup rebuilds the image (the options and sources are in the stamp already).
 */
const DEBIAN_FINISH_REVISION = 1;

/**
 * The host's apt sources, passed to mmdebstrap as its mirror argument, so the image is built from
 * whatever this host's apt reaches (deb822 `*.sources` files and one-line `sources.list` both work).
 */
export async function hostAptSources(): Promise<string[]> {
  const dir = '/etc/apt/sources.list.d';
  const files = (await readdir(dir).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.sources') || f.endsWith('.list'))
    .sort()
    .map((f) => join(dir, f));
  if (existsSync('/etc/apt/sources.list')) files.unshift('/etc/apt/sources.list');
  const withContent: string[] = [];
  for (const f of files) {
    const text = await readFile(f, 'utf8').catch(() => '');
    if (/^\s*(deb\s|Types:)/m.test(text)) withContent.push(f);
  }
  if (withContent.length === 0) {
    throw new Error('no apt sources on this host (/etc/apt/sources.list{,.d}); mmdebstrap needs a mirror');
  }
  return withContent;
}

/**
 * A key for the cache: mmdebstrap's options (the package list among them), the suite, the content
 * of the host's sources files and {@link DEBIAN_FINISH_REVISION}. A change in any of them rebuilds
 * the image on the next `setup`.
 */
export async function debianRecipeStamp(sources: readonly string[]): Promise<string> {
  const h = createHash('sha256');
  h.update(JSON.stringify(['mmdebstrap', DEBIAN_OPTIONS, DEBIAN_SUITE, DEBIAN_FINISH_REVISION]));
  for (const f of sources) h.update(JSON.stringify([f, await readFile(f, 'utf8')]));
  return h.digest('hex').slice(0, 16);
}

/**
 * Fills `root` with a Debian 12 root filesystem: `mmdebstrap --variant=minbase` with
 * {@link DEBIAN_INCLUDE}, from the host's apt sources. mmdebstrap runs as root (mode `root`) and
 * writes the tree directly; apt's package cache and lists are cleaned by mmdebstrap, so a guest
 * runs `apt-get update` before installing.
 */
export async function populateDebianRoot(
  root: string,
  sources: readonly string[],
  progress: (message: string) => void = () => undefined,
): Promise<void> {
  await runReporting(
    [
      'mmdebstrap',
      '--verbose', // stage lines (`I: ...`) even without a terminal; only those are shown
      ...DEBIAN_OPTIONS,
      DEBIAN_SUITE,
      root,
      ...sources,
    ],
    progress,
  );
  // The guest's init writes /etc/resolv.conf (user-mode network resolver); mmdebstrap leaves none
  // or the host's. A dangling symlink (systemd-resolved) would make that write fail.
  const resolv = join(root, 'etc', 'resolv.conf');
  if (await lstat(resolv).catch(() => undefined)) await rm(resolv, { force: true });
  const hosts = join(root, 'etc', 'hosts');
  if (!existsSync(hosts)) await writeFile(hosts, '127.0.0.1 localhost\n::1 localhost ip6-localhost\n');
}

/**
 * `setup`'s step for {@link DEBIAN_IMAGE}: cached while the guest runtime and the recipe are
 * unchanged; otherwise built (about a minute; mmdebstrap downloads ~60 MB of packages).
 */
export async function ensureDebianImage(
  store: ImageStore,
  runtimeStamp: string,
  progress: (message: string) => void,
): Promise<void> {
  const sources = await hostAptSources();
  const recipe = await debianRecipeStamp(sources);
  const existing = await store.meta(DEBIAN_IMAGE);
  if (existing?.runtime_stamp === runtimeStamp && existing.recipe_stamp === recipe) {
    progress(`image ${DEBIAN_IMAGE}: cached`);
    return;
  }
  progress(
    `image ${DEBIAN_IMAGE}: building with mmdebstrap (${DEBIAN_SUITE} minbase + ${DEBIAN_INCLUDE.join(', ')}) from ${sources.join(' ')}`,
  );
  const started = Date.now();
  const step = (m: string) => progress(`image ${DEBIAN_IMAGE}: mmdebstrap: ${m}`);
  await store.build(
    DEBIAN_IMAGE,
    `Debian 12 (${DEBIAN_SUITE}) minbase built by orch-agent setup`,
    (root) =>
      populateDebianRoot(root, sources, step).then(() =>
        progress(`image ${DEBIAN_IMAGE}: root filesystem ready, writing ext4`),
      ),
    { source: `mmdebstrap:${DEBIAN_SUITE}`, recipe_stamp: recipe },
  );
  const meta = await store.meta(DEBIAN_IMAGE);
  progress(
    `image ${DEBIAN_IMAGE}: ready (${((meta?.size_bytes ?? 0) / 2 ** 20).toFixed(0)} MiB, ${((Date.now() - started) / 1000).toFixed(0)} s)`,
  );
}

/** Runs a command, passing its `I: ...` stage lines to `progress`; rejects like `run` with the stderr tail. */
function runReporting(argv: readonly string[], progress: (message: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    const tail: string[] = [];
    createInterface({ input: child.stderr }).on('line', (line) => {
      tail.push(line);
      if (tail.length > 40) tail.shift();
      const m = /^I: (.*?)\.*$/.exec(line);
      if (
        m &&
        !/^(using|running|removing|skipping|automatically|chroot architecture|finding|success)/.test(m[1]!)
      )
        progress(m[1]!);
    });
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new CommandError(argv, code, tail.join('\n'))),
    );
  });
}
