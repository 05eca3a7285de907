import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { runOrch } from './run-orch.js';

/**
 * Secret names are the user's: `orch up` looks them up as own keys, so names like `constructor` or
 * `__proto__` are missing until given (checked before anything is sent, with no context at all).
 */
const dir = mkdtempSync(join(tmpdir(), 'orch-secret-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.each(['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__'])(
  'a definition referencing the secret %s without a value is refused before anything is sent',
  (name) => {
    writeFileSync(
      join(dir, `${name}.yaml`),
      `version: 1\nimage: debian-12\nservices:\n  app:\n    image: busybox\n    env:\n      X: { secret: ${name} }\n`,
    );
    const r = runOrch(['up', '-f', join(dir, `${name}.yaml`)]);
    expect(r.stderr).toContain(`orch: missing secrets: ${name}:`);
    expect(r.code).toBe(1);
  },
);
