import { execFile as execFileCb } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const execFile = promisify(execFileCb);

/**
 * Runs `program` (an ES module's text) the way a user's program would use our libraries: plain
 * `node` (no `source` condition, no TypeScript loader), from a temp directory outside the
 * repository whose `node_modules` is the repository's, so that `import('@board/client')` resolves
 * through the package's `exports` to what `npm install` built. Resolves with what it printed.
 *
 * @example
 * ```ts
 * const { stdout } = await runAsInstalled("const { connect } = await import('@board/client'); console.log(typeof connect);");
 * ```
 */
export async function runAsInstalled(program: string): Promise<{ stdout: string; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'as-installed-'));
  try {
    await symlink(join(repositoryRoot(), 'node_modules'), join(dir, 'node_modules'));
    await writeFile(join(dir, 'main.mjs'), program);
    return await execFile(process.execPath, ['main.mjs'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The nearest directory, from the working directory up, that holds the workspace's node_modules. */
function repositoryRoot(): string {
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'node_modules', '@support', 'pg'))) return dir;
    if (dir === dirname(dir)) throw new Error(`no node_modules with @support/pg above ${process.cwd()}`);
  }
}
