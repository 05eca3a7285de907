import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Vm } from './vm.js';

/**
 * Process supervision of a VM's QEMU: started as `setpriv --pdeathsig KILL -- qemu ...`, so it dies
 * with the agent whatever way the agent ends (never orphaned holding forwarded ports); its stderr
 * kept (last 4000 characters) for error messages; `onExit` called when it exits.
 */
export function spawnQemu(
  vm: Vm,
  qemu: string,
  argv: readonly string[],
  onExit: (code: number | null, signal: NodeJS.Signals | null) => void,
): void {
  const proc = spawn('setpriv', ['--pdeathsig', 'KILL', '--', qemu, ...argv], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  vm.proc = proc;
  vm.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
  proc.stderr!.on('data', (b: Buffer) => {
    vm.stderr = (vm.stderr + b.toString()).slice(-4000);
  });
  proc.once('error', (err) => {
    vm.stderr += String(err);
  });
  proc.once('exit', onExit);
}

/**
 * Ends QEMU (QMP `quit` when QMP is up, else SIGKILL; SIGKILL after 3 s either way), then closes
 * QMP, the guest channel and the console, and tells every console client the end (an empty buffer).
 */
export async function endQemu(vm: Vm): Promise<void> {
  if (vm.alive) {
    // A clean QMP quit when QMP is up; otherwise (still starting) there is nothing to save.
    if (vm.qmp) await vm.qmp.execute('quit').catch(() => undefined);
    else vm.proc?.kill('SIGKILL');
    const killer = setTimeout(() => vm.proc?.kill('SIGKILL'), 3000);
    await vm.exited;
    clearTimeout(killer);
  }
  vm.qmp?.close();
  vm.channel?.close();
  vm.console?.destroy();
  for (const c of vm.consoleClients) c(Buffer.alloc(0));
  vm.consoleClients.clear();
}

/**
 * Kills the QEMU of a previous agent run if `pid` still is one of ours (its command line names
 * `qemu-system` and `orch-vm`): defence in depth, since pdeathsig already ended it.
 */
export async function killStaleQemu(pid: number): Promise<void> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!(cmdline.includes('qemu-system') && cmdline.includes('orch-vm'))) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
