import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { runOrch } from './run-orch.js';

/**
 * Secret names are the user's: `orch up` looks them up as own keys, so names like `constructor` are
 * missing until given (checked before anything is sent, with no context at all). `__proto__` is no
 * secret name: no JSON reader would keep it (`@orch/protocol/rules`, RESERVED_KEY).
 */
const dir = mkdtempSync(join(tmpdir(), 'orch-secret-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.each(['constructor', 'toString', 'hasOwnProperty', 'valueOf'])(
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

test('a secret or env variable named __proto__ is refused with the definition line', () => {
  const file = join(dir, 'proto.yaml');
  writeFileSync(
    file,
    'version: 1\nimage: debian-12\nservices:\n  app:\n    image: busybox\n    env:\n      __proto__: x\n      X: { secret: __proto__ }\n',
  );
  const r = runOrch(['up', '-f', file]);
  expect(r.stderr).toContain(
    '7:7: env name "__proto__" of service "app" is reserved: no JSON reader keeps it',
  );
  expect(r.stderr).toContain('8:20: secret name "__proto__" is reserved: no JSON reader keeps it');
  expect(r.code).not.toBe(0);
});
