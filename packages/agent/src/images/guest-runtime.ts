import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, realpath, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { run } from '../util/run.js';
import { ORCH_CONSOLE, ORCH_GUEST_AGENT, ORCH_INIT } from './guest-scripts.js';
import { ORCH_SERVICE, ORCH_SERVICE_LOG, ORCH_WAIT_PORT } from './guest-services.js';

/** The static busybox from Debian's busybox-static. */
export const HOST_BUSYBOX = '/bin/busybox';

/** The OCI runtime of manifest services, from Debian's crun (installed by setup). */
export const HOST_CRUN = '/usr/bin/crun';

/** A hash of everything the guest runtime is made of; an image built with another one is rebuilt. */
export async function guestRuntimeStamp(): Promise<string> {
  const h = createHash('sha256');
  h.update(ORCH_INIT).update(ORCH_CONSOLE).update(ORCH_GUEST_AGENT);
  h.update(ORCH_SERVICE).update(ORCH_SERVICE_LOG).update(ORCH_WAIT_PORT);
  h.update(await readFile(HOST_BUSYBOX));
  h.update(await readFile(HOST_CRUN).catch(() => Buffer.alloc(0)));
  return h.digest('hex').slice(0, 16);
}

/**
 * Installs the guest runtime under `<root>/orch`: a static busybox with a link per applet, a
 * self-contained resize2fs (the host's, with its libraries and loader), PID 1 (`init`), the
 * console respawner and the guest agent. Nothing outside `/orch` is touched, so any root
 * filesystem (ours or an imported tarball) boots the same way.
 */
export async function installGuestRuntime(root: string): Promise<void> {
  const bin = join(root, 'orch', 'bin');
  const lib = join(root, 'orch', 'lib');
  await mkdir(bin, { recursive: true });
  await mkdir(lib, { recursive: true });
  await copyFile(HOST_BUSYBOX, join(bin, 'busybox'));
  await chmod(join(bin, 'busybox'), 0o755);
  const applets = (await run([HOST_BUSYBOX, '--list'])).split('\n').filter((a) => /^[\w.[-]+$/.test(a));
  for (const applet of applets) {
    if (applet === 'busybox') continue;
    await symlink('busybox', join(bin, applet)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
  // resize2fs grows the root filesystem to the VM's disk size at boot; busybox has none. crun runs
  // the manifest's services. Both come with their libraries and the loader, under /orch/lib, so that
  // they run on any root filesystem (no libc needed in the image).
  await installElf(lib, bin, 'resize2fs', await realpath('/sbin/resize2fs'));
  await installElf(lib, bin, 'crun', HOST_CRUN);
  await writeFile(join(root, 'orch', 'init'), ORCH_INIT, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'console'), ORCH_CONSOLE, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'guest-agent'), ORCH_GUEST_AGENT, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'service'), ORCH_SERVICE, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'service-log'), ORCH_SERVICE_LOG, { mode: 0o755 });
  await writeFile(join(bin, 'orch-wait-port'), ORCH_WAIT_PORT, { mode: 0o755 });
}

/**
 * Copies the dynamically linked program `path` and every library `ldd` lists (and the loader) into
 * `lib`, and writes `bin/<name>`, a wrapper that runs it through that loader with that library path.
 */
async function installElf(lib: string, bin: string, name: string, path: string): Promise<void> {
  await copyFile(path, join(lib, name));
  await chmod(join(lib, name), 0o755);
  let loader = '';
  for (const line of (await run(['ldd', path])).split('\n')) {
    const m = /(\/\S+)\s+\(0x/.exec(line);
    if (!m) continue;
    const dep = m[1]!;
    await copyFile(await realpath(dep), join(lib, basename(dep)));
    if (basename(dep).startsWith('ld-linux')) loader = basename(dep);
  }
  await writeFile(
    join(bin, name),
    `#!/orch/bin/sh\nexec /orch/lib/${loader} --library-path /orch/lib /orch/lib/${name} "$@"\n`,
    { mode: 0o755 },
  );
}

/**
 * The recipe of the `busybox` image that `orch-agent setup` builds ({@link populateBusyboxRoot}),
 * kept in its `image.json`: bump the revision with any change to what that function writes, and
 * the next setup rebuilds the image instead of keeping the old one (the guest runtime it carries
 * is stamped on its own, {@link guestRuntimeStamp}).
 */
export const BUSYBOX_RECIPE = 'busybox-root-r1';

/** A minimal busybox root filesystem: FHS directories, applet links, root user. */
export async function populateBusyboxRoot(root: string): Promise<void> {
  for (const d of [
    'bin',
    'sbin',
    'usr/bin',
    'usr/sbin',
    'etc',
    'root',
    'tmp',
    'var/log',
    'proc',
    'sys',
    'dev',
    'run',
    'home',
    'srv',
  ]) {
    await mkdir(join(root, d), { recursive: true });
  }
  await chmod(join(root, 'tmp'), 0o1777);
  await copyFile(HOST_BUSYBOX, join(root, 'bin', 'busybox'));
  await chmod(join(root, 'bin', 'busybox'), 0o755);
  for (const path of (await run([HOST_BUSYBOX, '--list-full'])).split('\n').filter(Boolean)) {
    if (path === 'bin/busybox') continue;
    await symlink('/bin/busybox', join(root, path)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
  await writeFile(
    join(root, 'etc', 'passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n',
  );
  await writeFile(join(root, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  await writeFile(join(root, 'etc', 'hosts'), '127.0.0.1 localhost\n');
  await writeFile(join(root, 'etc', 'os-release'), 'NAME="orch busybox"\nID=orch-busybox\n');
  await writeFile(
    join(root, 'etc', 'profile'),
    'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n',
  );
}
