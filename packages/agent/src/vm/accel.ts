import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, readFile, writeFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { PROBE_MARKER } from '../images/guest-scripts.js';
import type { Layout } from '../images/layout.js';
import { run } from '../util/run.js';

export type Accelerator = 'kvm' | 'tcg';

/**
 * The host's TSC frequency in kHz for the guest's `tsc_early_khz=`: microvm has no HPET or PM
 * timer, and under TCG a failed PIT calibration hangs the guest in "Calibrating delay loop"
 * (notes/qemu-microvm.md). Undefined when the host does not say.
 */
export async function hostTscKhz(): Promise<number | undefined> {
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const m = /^cpu MHz\s*:\s*([\d.]+)/m.exec(cpuinfo);
  return m ? Math.round(Number(m[1]) * 1000) : undefined;
}

interface Verdict {
  readonly key: string;
  readonly accelerator: Accelerator;
  readonly checked_at: string;
}

/**
 * Picks the accelerator. `tcg` and `kvm` are taken as asked (`kvm` needs /dev/kvm). `auto` probes
 * KVM with a real short boot of the guest kernel (the initramfs prints a marker and powers off):
 * `/dev/kvm` opening is not enough, nested KVM here opens and then fails on a real guest. The
 * verdict is cached per QEMU version and kernel in AGENT_DATA_DIR/accel.json.
 */
export async function resolveAccelerator(
  wanted: 'auto' | 'kvm' | 'tcg',
  opts: { layout: Layout; qemu: string; kernel: string | undefined; logger: Logger },
): Promise<Accelerator> {
  if (wanted === 'tcg') return 'tcg';
  const kvmOpen = await access('/dev/kvm', constants.R_OK | constants.W_OK).then(
    () => true,
    () => false,
  );
  if (wanted === 'kvm') {
    if (!kvmOpen) throw new Error('--accel kvm: /dev/kvm is missing or not accessible');
    return 'kvm';
  }
  if (!kvmOpen || !opts.kernel) return 'tcg';
  const version = (await run([opts.qemu, '--version']).catch(() => '')).split('\n')[0] ?? '';
  const key = `${version}|${opts.kernel}`;
  try {
    const cached = JSON.parse(await readFile(opts.layout.accelVerdict, 'utf8')) as Verdict;
    if (cached.key === key) return cached.accelerator;
  } catch {
    // no verdict yet
  }
  opts.logger.info('probing KVM with a short real boot');
  const ok = await probeBoot(opts.qemu, opts.kernel, opts.layout.initramfs, 'kvm', 15_000);
  const verdict: Verdict = { key, accelerator: ok ? 'kvm' : 'tcg', checked_at: new Date().toISOString() };
  await writeFile(opts.layout.accelVerdict, `${JSON.stringify(verdict, null, 2)}\n`);
  opts.logger.info(
    { accelerator: verdict.accelerator },
    ok ? 'KVM runs guests' : 'KVM does not run guests; using TCG',
  );
  return verdict.accelerator;
}

/** Boots the initramfs with `orch.probe`; true when its marker appears on the console in time. */
export function probeBoot(
  qemu: string,
  kernel: string,
  initramfs: string,
  accel: Accelerator,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(
      'setpriv',
      [
        '--pdeathsig',
        'KILL',
        '--',
        qemu,
        '-M',
        'microvm',
        '-accel',
        accel,
        '-m',
        '128',
        '-nodefaults',
        '-no-user-config',
        '-nographic',
        '-kernel',
        kernel,
        '-initrd',
        initramfs,
        '-append',
        'console=ttyS0 quiet orch.probe',
        '-serial',
        'stdio',
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    let out = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes(PROBE_MARKER)) done(true);
    });
    child.once('exit', () => done(out.includes(PROBE_MARKER)));
    child.once('error', () => done(false));
  });
}
