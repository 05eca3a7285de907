import { CreateEnvironmentRequest, decodeManifestInline, manifestServices, OrchError } from '@orch/protocol';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { compileSource } from './index.js';

/**
 * One service name rule (`serviceNameProblem` of `@orch/protocol/rules`): a name `orch compile`
 * accepts is one orchd accepts in the manifest, and the other way round. Run with names near the
 * rule's edges (case, `.`, digits first, length 63/64) and with any text.
 */

/** Whether `orch compile` accepts a definition whose only service is `name`. */
function offline(name: string): boolean {
  const definition = JSON.stringify({ version: 1, services: { [name]: { image: 'debian-12' } } });
  const result = compileSource(definition, { taskId: 't' });
  if (!result.ok) return false;
  // What compiles is what orchd takes: the body passes the server's schema and manifest check.
  const body = { ...result.compiled.request, secrets: {} };
  const parsed = CreateEnvironmentRequest.safeParse(body);
  expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  expect(manifestServices(decodeManifestInline(body.manifest_inline)).map((s) => s.name)).toEqual([name]);
  return true;
}

/** Whether orchd accepts a manifest (as any client could write it) whose only service is `name`. */
function server(name: string): boolean {
  const manifest = JSON.stringify({ version: '1', services: { [name]: { image: 'debian-12' } } });
  try {
    manifestServices(manifest);
    return true;
  } catch (err) {
    if (err instanceof OrchError && err.code === 'invalid_argument') return false;
    throw err;
  }
}

const near = fc.string({
  unit: fc.constantFrom(...'abzAZ09_-.'.split('')),
  minLength: 0,
  maxLength: 8,
});

describe('service names: one rule offline and on the server', () => {
  test.each([
    ['db', true],
    ['web-2', true],
    ['a_b', true],
    ['a'.repeat(63), true],
    ['a'.repeat(64), false],
    ['Web', false],
    ['DB', false],
    ['web.1', false],
    ['1db', false],
    ['10', false],
    ['_db', false],
    ['-db', false],
    ['', false],
    ['..', false],
    ['a/b', false],
    ['é', false],
  ])('%j: accepted %s by both', (name, accepted) => {
    expect(offline(name)).toBe(accepted);
    expect(server(name)).toBe(accepted);
  });

  test('any name: orch compile accepts it exactly when orchd does', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          near,
          near.map((s) => `a${s}`),
          fc.string({ maxLength: 70 }),
        ),
        (name) => {
          expect(offline(name)).toBe(server(name));
        },
      ),
      { numRuns: 300 },
    );
  });

  test('the diagnostic states the rule', () => {
    const result = compileSource('version: 1\nservices:\n  Web.1:\n    image: debian-12\n', { taskId: 't' });
    expect(result.ok ? [] : result.diagnostics).toEqual([
      {
        line: 3,
        col: 3,
        message:
          'service name "Web.1" must be 1-63 lower-case letters, digits, "_" or "-", starting with a letter',
      },
    ]);
  });
});
