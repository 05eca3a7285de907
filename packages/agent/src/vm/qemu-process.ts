import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { VmUser } from '../net/isolation.js';
import type { Vm } from './vm.js';

/** The QEMU of one VM: a child of this agent, or one adopted from a previous agent run. */
export interface QemuHandle {
  readonly pid: number | undefined;
  /** Whether the process still runs. */
  readonly alive: boolean;
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
  kill(): void;
}

/** The path by which QEMU opens the `index`-th file of `spawnQemu`'s `inherit` (descriptor 3 + index). */
export function inheritedPath(index: number): string {
  return `/proc/self/fd/${3 + index}`;
}

/** How often an adopted QEMU (not our child: no exit event) is checked for life. */
const ADOPTED_POLL_MS = 500;

/**
 * Starts a VM's QEMU in its own session (`detached`): a Ctrl-C of the agent's terminal reaches the
 * agent only, which then suspends its VMs, and an agent that is killed (SIGKILL, a crash) leaves its
 * VMs running, to be re-adopted by the next agent start ({@link adoptQemu}). Its stderr goes to
 * `qemu.stderr` in the VM's directory (a pipe to a dead agent would break), whose tail is quoted in
 * error messages. `onExit` is called when it exits.
 *
 * With `user` (network isolation on), QEMU runs as that uid through `setpriv` (groups cleared, no
 * new privileges, no capabilities), and `inherit` are files the agent opens for it (read-only)
 * and passes as descriptors 3, 4, ... (`/proc/self/fd/N` in its argv: {@link inheritedPath}), so
 * that QEMU needs no access to the paths of the kernel, the initramfs or the images.
 */
export function spawnQemu(
  vm: Vm,
  qemu: string,
  argv: readonly string[],
  onExit: (code: number | null, signal: NodeJS.Signals | null) => void,
  opts: { readonly user?: VmUser | undefined; readonly inherit?: readonly string[] } = {},
): void {
  const stderrFile = join(vm.dir, 'qemu.stderr');
  const fds = [openSync(stderrFile, 'w', 0o600)];
  let proc: ReturnType<typeof spawn>;
  try {
    for (const file of opts.inherit ?? []) fds.push(openSync(file, 'r'));
    const [cmd, args] = opts.user
      ? [
          'setpriv',
          [
            `--reuid=${opts.user.uid}`,
            `--regid=${opts.user.gid}`,
            opts.user.groups.length ? `--groups=${opts.user.groups.join(',')}` : '--clear-groups',
            '--inh-caps=-all',
            '--no-new-privs',
            '--',
            qemu,
            ...argv,
          ],
        ]
      : [qemu, argv];
    proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', ...fds], detached: true });
  } finally {
    for (const fd of fds) closeSync(fd);
  }
  proc.unref();
  let done = false;
  const exited = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      done = true;
      resolve();
    }),
  );
  proc.once('error', (err) => {
    vm.stderr += String(err);
  });
  proc.once('exit', (code, signal) => {
    void readTail(stderrFile).then((tail) => {
      vm.stderr = (tail + vm.stderr).slice(-4000);
      onExit(code, signal);
    });
  });
  vm.qemu = {
    pid: proc.pid,
    get alive() {
      return !done && proc.exitCode === null && proc.signalCode === null;
    },
    exited,
    kill: () => proc.kill('SIGKILL'),
  };
}

/**
 * Takes over the QEMU `pid` left running by a previous agent run, if it is still the QEMU of the VM
 * in `dir` (its command line names `qemu-system` and that directory). Its exit is noticed by polling
 * (it is not our child); `onExit` is called then. Returns whether it was adopted.
 */
export async function adoptQemu(vm: Vm, pid: number, onExit: () => void): Promise<boolean> {
  if (!(await isQemuOf(pid, vm.dir))) return false;
  let done = false;
  const exited = new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (pidAlive(pid)) return;
      clearInterval(timer);
      done = true;
      resolve();
      void readTail(join(vm.dir, 'qemu.stderr')).then((tail) => {
        vm.stderr = (tail + vm.stderr).slice(-4000);
        onExit();
      });
    }, ADOPTED_POLL_MS);
    timer.unref();
  });
  vm.qemu = {
    pid,
    get alive() {
      return !done && pidAlive(pid);
    },
    exited,
    kill: () => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    },
  };
  return true;
}

/**
 * Ends QEMU (QMP `quit` when QMP is up, else SIGKILL; SIGKILL after 3 s either way), then closes
 * QMP, the guest channel and the console, and tells every console client the end (an empty buffer).
 */
export async function endQemu(vm: Vm): Promise<void> {
  if (vm.alive) {
    // A clean QMP quit when QMP is up; otherwise (still starting) there is nothing to save.
    if (vm.qmp) await vm.qmp.execute('quit').catch(() => undefined);
    else vm.qemu?.kill();
    const killer = setTimeout(() => vm.qemu?.kill(), 3000);
    await vm.qemu?.exited;
    clearTimeout(killer);
  }
  vm.qmp?.close();
  vm.channel?.close();
  vm.console?.destroy();
  vm.log.detach();
  for (const c of vm.consoleClients) c(Buffer.alloc(0));
  vm.consoleClients.clear();
}

/** Kills the QEMU `pid` of a previous agent run if it still is the QEMU of the VM in `dir`. */
export async function killStaleQemu(pid: number, dir: string): Promise<void> {
  if (!(await isQemuOf(pid, dir))) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * PIDs of QEMU processes whose command line names a path under `vmsDir`: after an agent crash,
 * the ones that no VM record claims (QEMU spawned just before its record was written) are killed,
 * so none is left holding forwarded ports.
 */
export async function qemuUnder(vmsDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const p of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(p)) continue;
    const cmdline = await readFile(`/proc/${p}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes('qemu-system') && cmdline.includes(`${vmsDir}/`)) pids.push(Number(p));
  }
  return pids;
}

async function isQemuOf(pid: number, dir: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // A zombie (state Z after the command name) is not a running QEMU.
  if (/\) Z /.test(stat)) return false;
  return cmdline.includes('qemu-system') && cmdline.includes('orch-vm') && cmdline.includes(`${dir}/`);
}

/** Whether `pid` runs (a zombie, which an init that does not reap leaves behind, does not). */
function pidAlive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function readTail(path: string): Promise<string> {
  try {
    const f = await open(path, 'r');
    try {
      const { size } = await f.stat();
      const len = Math.min(size, 4000);
      const buf = Buffer.alloc(len);
      await f.read(buf, 0, len, size - len);
      return buf.toString('utf8');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}
