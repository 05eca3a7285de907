import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The `orch` executable as npm links it. */
export const ORCH_BIN = fileURLToPath(new URL('../bin/orch.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built CLI as a user would, with a clean environment (no orchestrator context). */
export function runOrch(
  args: readonly string[],
  cwd: string = REPO_ROOT,
  prefix: readonly string[] = [],
): Run {
  const [cmd, ...rest] = [...prefix, process.execPath, ORCH_BIN, ...args];
  const r = spawnSync(cmd!, rest, {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
  });
  if (r.error) throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs the built CLI as {@link runOrch} does, without blocking this process (so that a server in
 * the test can answer it), with its contexts file under `configDir` (`XDG_CONFIG_HOME`).
 */
export function runOrchAsync(args: readonly string[], configDir: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ORCH_BIN, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', XDG_CONFIG_HOME: configDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
