import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { AgentVm } from '@orch/protocol';

export const AGENT_BIN = fileURLToPath(new URL('../bin/orch-agent.js', import.meta.url));
/**
 * Kernel, initramfs and images built once by `orch-agent setup` and shared by every test agent: the
 * directory `scripts/test-agent-assets.mjs` names (a per-user cache keyed by the image code), which
 * the test run's global setup puts in `ORCH_TEST_AGENT_ASSETS` (set it to use another, e.g. to try
 * an image build without touching them).
 */
export const ASSETS = process.env.ORCH_TEST_AGENT_ASSETS ?? '';

/** Whether QEMU is installed. Under CI=true a VM suite without it fails; it is never skipped. */
export function qemuAvailable(): boolean {
  const found = spawnSync('sh', ['-c', 'command -v qemu-system-x86_64'], { encoding: 'utf8' }).status === 0;
  if (!found && process.env.CI === 'true')
    throw new Error('QEMU (qemu-system-x86_64) is required for the *.vm.test.ts suites under CI');
  return found;
}

let assetsReady = false;
/** Runs `orch-agent setup` (busybox and debian-12) into the shared assets directory (idempotent, cached). */
export function ensureGuestAssets(): string {
  if (assetsReady) return ASSETS;
  runSetup();
  assetsReady = true;
  return ASSETS;
}

/** One `orch-agent setup` run into the assets directory; returns its output (progress lines). */
export function runSetup(): string {
  if (!ASSETS) throw new Error('ORCH_TEST_AGENT_ASSETS is not set (the vitest global setup sets it)');
  const r = spawnSync(process.execPath, [AGENT_BIN, 'setup', '--data-dir', ASSETS], {
    encoding: 'utf8',
    timeout: 1_200_000,
    env: { ...process.env, AGENT_IMAGES: process.env.AGENT_IMAGES || 'busybox,debian-12' },
  });
  if (r.status !== 0) throw new Error(`orch-agent setup failed:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** PIDs of QEMU processes whose command line mentions `needle` (a data dir). */
export function qemuPids(needle: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return cmd.includes('qemu-system') && cmd.includes(needle);
      } catch {
        return false;
      }
    })
    .map(Number);
}

export interface Reply<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

/** A running `orch-agent` started from the built binary, with its own data dir (kernel and images linked in). */
export class AgentProcess {
  /** Everything it printed: stdout, and its JSON log lines from stderr. */
  readonly output: string[] = [];
  private constructor(
    private readonly proc: ChildProcess,
    readonly port: number,
    readonly token: string,
    readonly dataDir: string,
    /** The address it listens on (127.0.0.1, or its network namespace's own address). */
    readonly host = '127.0.0.1',
  ) {}

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  /** A fresh data dir sharing the setup assets; remove it with {@link removeDataDir}. */
  static makeDataDir(): string {
    const assets = ensureGuestAssets();
    const dir = mkdtempSync(join(tmpdir(), 'orch-agent-test-'));
    symlinkSync(join(assets, 'kernel'), join(dir, 'kernel'));
    // Images one by one, so that a test can import more into its own data dir.
    mkdirSync(join(dir, 'images'));
    for (const name of readdirSync(join(assets, 'images'))) {
      if (!name.startsWith('.')) symlinkSync(join(assets, 'images', name), join(dir, 'images', name));
    }
    return dir;
  }

  static removeDataDir(dir: string): void {
    for (const pid of qemuPids(dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }

  static async start(opts: {
    dataDir: string;
    env?: Record<string, string>;
    token?: string;
    /** Run it in this network namespace (`ip netns exec`), listening on `host` there. */
    netns?: string;
    host?: string;
  }): Promise<AgentProcess> {
    const token = opts.token ?? `tok-${randomBytes(12).toString('hex')}`;
    mkdirSync(opts.dataDir, { recursive: true });
    // `ip netns exec` execs the program: the child's pid is the agent's own (SIGKILL reaches it).
    const [cmd, args] = opts.netns
      ? ['ip', ['netns', 'exec', opts.netns, process.execPath, AGENT_BIN]]
      : [process.execPath, [AGENT_BIN]];
    const proc = spawn(cmd as string, args as string[], {
      env: {
        ...(opts.host ? { AGENT_HOST: opts.host } : {}),
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        AGENT_PORT: '0',
        AGENT_ACCEL: 'tcg',
        AGENT_DATA_DIR: opts.dataDir,
        MICROVM_AGENT_TOKEN: token,
        AGENT_LOG_LEVEL: 'info',
        ...opts.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    const errLines = createInterface({ input: proc.stderr! });
    errLines.on('line', (l) => output.push(l));
    const lines = createInterface({ input: proc.stdout! });
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`orch-agent did not start:\n${output.join('\n')}`));
      }, 60_000);
      lines.on('line', (l) => {
        output.push(l);
        const m = /^orch-agent listening on http:\/\/.*:(\d+)$/.exec(l);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`orch-agent exited with ${code}:\n${output.join('\n')}`));
      });
    });
    const agent = new AgentProcess(proc, port, token, opts.dataDir, opts.host ?? '127.0.0.1');
    agent.output.push(...output);
    lines.on('line', (l) => agent.output.push(l));
    errLines.on('line', (l) => agent.output.push(l));
    return agent;
  }

  async request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    token = this.token,
  ): Promise<Reply<T>> {
    const res = await fetch(`${this.url}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  /** Polls a VM until it leaves `creating` (or reaches `until`); returns it. */
  async waitVm(id: string, until: readonly string[] = ['running', 'error', 'stopped']): Promise<AgentVm> {
    for (;;) {
      const r = await this.request<AgentVm>('GET', `/v1/vms/${id}`);
      if (r.status !== 200) throw new Error(`GET /v1/vms/${id}: ${r.status} ${JSON.stringify(r.body)}`);
      if (until.includes(r.body.state)) return r.body;
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  /** Runs argv in the VM; returns exit code and decoded output. */
  async exec(
    id: string,
    argv: string[],
    extra: Record<string, unknown> = {},
  ): Promise<{
    exit_code: number | null;
    stdout: string;
    stderr: string;
    timed_out: boolean;
    truncated: boolean;
  }> {
    const r = await this.request<{
      exit_code: number | null;
      stdout_base64: string;
      stderr_base64: string;
      timed_out: boolean;
      truncated: boolean;
    }>('POST', `/v1/vms/${id}/exec`, { argv, ...extra });
    if (r.status !== 200) throw new Error(`exec: ${r.status} ${JSON.stringify(r.body)}`);
    return {
      exit_code: r.body.exit_code,
      stdout: Buffer.from(r.body.stdout_base64, 'base64').toString('utf8'),
      stderr: Buffer.from(r.body.stderr_base64, 'base64').toString('utf8'),
      timed_out: r.body.timed_out,
      truncated: r.body.truncated,
    };
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** SIGTERM and wait for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.proc.exitCode;
    const exited = new Promise<number | null>((r) => this.proc.once('exit', (code) => r(code)));
    this.proc.kill(signal);
    return exited;
  }
}

/** A create-VM body with small defaults. */
export function vmRequest(
  id: string,
  over: Record<string, unknown> = {},
  spec: Record<string, unknown> = {},
) {
  return {
    id,
    spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600, ...spec },
    manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
    startup_script: 'true\n',
    secrets: {},
    expose: [],
    ...over,
  };
}

export { buildServiceImage } from './service-fixtures.js';
export { existsSync };

/** Regular files under `dir` (symlinks not followed, files of 512 MiB and more skipped) whose bytes contain `needle`. */
export function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && statSync(p).size < 512 * 2 ** 20 && readFileSync(p).includes(needle))
        hits.push(p);
    }
  };
  walk(dir);
  return hits;
}

/** `orch-agent image import NAME SOURCE` into `dataDir` (before the agent starts); throws with its output on failure. */
export function importImage(dataDir: string, name: string, source: string): void {
  const r = spawnSync(process.execPath, [AGENT_BIN, 'image', 'import', name, source, '--data-dir', dataDir], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`orch-agent image import failed:\n${r.stdout}\n${r.stderr}`);
}
