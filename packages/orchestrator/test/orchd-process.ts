import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestStore } from '@support/pg/testing';

const ORCHD_BIN = fileURLToPath(new URL('../bin/orchd.js', import.meta.url));

/** A running `orchd` started from the built binary, as an operator would start it. */
export class OrchdProcess {
  /** Every line it printed (JSON logs), for assertions about what is and is not logged. */
  readonly output: string[] = [];
  private constructor(
    private readonly proc: ChildProcess,
    readonly port: number,
    readonly env: Readonly<Record<string, string>>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Starts orchd with these settings (ORCH_PORT defaults to a free port) and waits until it prints
   * its `orchd listening on <url>` line (stdout; its JSON logs go to stderr).
   */
  static async start(env: Record<string, string>, args: string[] = []): Promise<OrchdProcess> {
    const fullEnv = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ORCH_PORT: '0',
      ORCH_LOG_LEVEL: 'info',
      ...env,
    };
    const proc = spawn(process.execPath, [ORCHD_BIN, ...args], {
      env: fullEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    const lines = createInterface({ input: proc.stdout! });
    const errLines = createInterface({ input: proc.stderr! });
    errLines.on('line', (l) => output.push(l));
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`orchd did not start:\n${output.join('\n')}`));
      }, 60_000);
      lines.on('line', (l) => {
        output.push(l);
        const m = /^orchd listening on http:\/\/.*:(\d+)$/.exec(l);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`orchd exited with ${code}:\n${output.join('\n')}`));
      });
    });
    const o = new OrchdProcess(proc, port, fullEnv);
    o.output.push(...output);
    lines.on('line', (l) => o.output.push(l));
    errLines.on('line', (l) => o.output.push(l));
    return o;
  }

  /** Sends an HTTP request; the body is JSON-encoded unless it is a string. */
  async request(
    method: string,
    path: string,
    opts: { token?: string; cookie?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: unknown; headers: Headers }> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
    if (opts.cookie !== undefined) headers.cookie = opts.cookie;
    if (opts.body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers,
      ...(opts.body !== undefined
        ? { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }
        : {}),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON; leave as text so the assertion shows it
    }
    return { status: res.status, body, headers: res.headers };
  }

  /** Sends `signal` (SIGKILL: an orchd that dies mid-work) and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.proc.once('exit', () => r()));
    this.proc.kill(signal);
    await exited;
  }

  /** SIGTERM and wait for a clean exit. */
  async stop(): Promise<number | null> {
    if (this.proc.exitCode !== null) return this.proc.exitCode;
    const exited = new Promise<number | null>((r) => this.proc.once('exit', (code) => r(code)));
    this.proc.kill('SIGTERM');
    return exited;
  }
}

/** A temporary data directory for an embedded store; removed by `cleanup()`. */
export function tempDataDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'orchd-data-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** orchd's settings for a test store: `DATABASE_URL` and a key for the server, the data dir for the embedded one. */
export function orchdStoreEnv(store: TestStore, dataDir: string): Record<string, string> {
  return store.databaseUrl
    ? { DATABASE_URL: store.databaseUrl, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex') }
    : { ORCH_DATA_DIR: dataDir };
}
