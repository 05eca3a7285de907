import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedPostgres, postmasterPid } from '../embedded-postgres.js';

/**
 * A fresh temp directory that user `postgres` can traverse (0755): an embedded PostgreSQL under it
 * runs as `postgres` when the tests run as root.
 */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await chmod(dir, 0o755);
  return dir;
}

/**
 * Stops an embedded PostgreSQL left running under `dataDir` (by a program killed with SIGKILL, or
 * one whose test failed before stopping it) and removes the directory.
 */
export async function removeDataDir(dataDir: string): Promise<void> {
  const pid = await postmasterPid(EmbeddedPostgres.layout(dataDir, 'test').pgData);
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGCONT'); // a test may have frozen it
      process.kill(pid, 'SIGQUIT'); // immediate shutdown
      for (let i = 0; i < 200; i++) {
        process.kill(pid, 0);
        await new Promise((r) => setTimeout(r, 50));
      }
    } catch {
      // gone (or never there)
    }
  }
  await rm(dataDir, { recursive: true, force: true });
}
