// Starts the built orchd for a benchmark on a fresh embedded store and a free port.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * Returns `{ url, stop }` once orchd prints that it listens. `bin` runs another build's orchd (for
 * example main's, for a before/after run).
 */
export async function startOrchd(env = {}, bin = 'packages/orchestrator/bin/orchd.js') {
  const dataDir = mkdtempSync(join(tmpdir(), 'orchd-bench-'));
  const proc = spawn(process.execPath, [bin], {
    env: { PATH: process.env.PATH, ORCH_PORT: '0', ORCH_DATA_DIR: dataDir, ORCH_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (l) => {
      const m = /^orchd listening on http:\/\/.*:(\d+)$/.exec(l);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`orchd exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
