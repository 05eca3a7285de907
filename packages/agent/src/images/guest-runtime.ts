import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, realpath, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { run } from '../util/run.js';
import { ORCH_CONSOLE, ORCH_GUEST_AGENT, ORCH_INIT } from './guest-scripts.js';

/** The static busybox from Debian's busybox-static. */
export const HOST_BUSYBOX = '/bin/busybox';

/** A hash of everything the guest runtime is made of; an image built with another one is rebuilt. */
export async function guestRuntimeStamp(): Promise<string> {
  const h = createHash('sha256');
  h.update(ORCH_INIT).update(ORCH_CONSOLE).update(ORCH_GUEST_AGENT);
  h.update(await readFile(HOST_BUSYBOX));
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
  // resize2fs grows the root filesystem to the VM's disk size at boot; busybox has none.
  const resize2fs = await realpath('/sbin/resize2fs');
  await copyFile(resize2fs, join(lib, 'resize2fs'));
  let loader = '';
  for (const line of (await run(['ldd', resize2fs])).split('\n')) {
    const m = /(\/\S+)\s+\(0x/.exec(line);
    if (!m) continue;
    const path = m[1]!;
    await copyFile(await realpath(path), join(lib, basename(path)));
    if (basename(path).startsWith('ld-linux')) loader = basename(path);
  }
  await writeFile(
    join(bin, 'resize2fs'),
    `#!/orch/bin/sh\nexec /orch/lib/${loader} --library-path /orch/lib /orch/lib/resize2fs "$@"\n`,
    { mode: 0o755 },
  );
  await writeFile(join(root, 'orch', 'init'), ORCH_INIT, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'console'), ORCH_CONSOLE, { mode: 0o755 });
  await writeFile(join(root, 'orch', 'guest-agent'), ORCH_GUEST_AGENT, { mode: 0o755 });
}

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
