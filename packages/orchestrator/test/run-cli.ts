import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ORCH_BIN = fileURLToPath(new URL('../../cli/bin/orch.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * Runs the built `orch` CLI without blocking this process (test agents answer from here), with its
 * contexts file under `configDir`.
 */
export function orchCli(
  configDir: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [ORCH_BIN, ...args],
      {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        maxBuffer: 64 << 20,
        env: { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: configDir, HOME: '/nonexistent' },
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
