/**
 * The lint rule (biome.json, `noRestrictedImports` per directory depth) that keeps tests and code
 * from importing another package by a relative path: run on a scratch tree with the repository's
 * configuration, it refuses `../../other/test/fixtures.js` and lets in-package imports through.
 */
import { execFile as execFileCb } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const execFile = promisify(execFileCb);
const ROOT = join(import.meta.dirname, '../../..');

async function lint(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lint-imports-'));
  try {
    await copyFile(join(ROOT, 'biome.json'), join(dir, 'biome.json'));
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    }
    const biome = join(ROOT, 'node_modules/.bin/biome');
    const run = execFile(biome, ['lint', '--vcs-enabled=false', '--max-diagnostics=50', '.'], { cwd: dir });
    const { stdout, stderr } = await run.catch((e: { stdout: string; stderr: string }) => e);
    return stdout + stderr;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const importing = (from: string) => `import { x } from '${from}';\n\nexport const y = x;\n`;

it('refuses relative imports out of a package, at any depth, and allows those inside it', async () => {
  const out = await lint({
    'packages/a/test/fixture-import.test.ts': importing('../../b/test/fixtures.js'),
    'packages/a/src/deep/source-import.ts': importing('../../../b/src/index.js'),
    'bench/dist-import.mjs': importing('../packages/b/dist/index.js'),
    'packages/a/test/own.test.ts': importing('../src/index.js'),
    'packages/a/src/deep/own.ts': importing('../../src/index.js'),
  });
  const refused = [...out.matchAll(/^(\S+):\d+:\d+ lint\/style\/noRestrictedImports/gm)].map((m) => m[1]);
  expect(refused.sort()).toEqual([
    'bench/dist-import.mjs',
    'packages/a/src/deep/source-import.ts',
    'packages/a/test/fixture-import.test.ts',
  ]);
});
