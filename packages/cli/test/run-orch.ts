import { spawnSync } from 'node:child_process';
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
