import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

test('imports as installed, through its exports (dist, built by npm install), outside vitest', () => {
  const r = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      "const m = await import('@support/server'); const t = await import('@support/server/testing'); console.log(typeof m.runMain, typeof m.setLongTimeout, typeof t.rawHttp);",
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('function function function');
});
