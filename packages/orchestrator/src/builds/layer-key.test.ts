import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { BUILD_LINE_ENV, layerKey, layerKeys, layerSecretKey, secretMacs } from './layer-key.js';

const KEY = layerSecretKey(Buffer.alloc(32, 7));
const base = {
  parent: `sha256:${'0'.repeat(64)}`,
  arch: 'amd64',
  storageGb: 10,
  workspace: '/workspace',
  env: BUILD_LINE_ENV,
  secretMacs: secretMacs(KEY, new Map([['tok', 'value-1']])),
  line: 'apt-get install -y curl',
};

describe('layer keys', () => {
  test('the documented recipe: sha256 of the JSON array, pairs sorted by name', () => {
    const mac = createHashMac('value-1');
    const recipe = JSON.stringify([
      'orch-layer-v1',
      base.parent,
      'amd64',
      10,
      '/workspace',
      [['HOME', '/root']],
      [['tok', mac]],
      'apt-get install -y curl',
    ]);
    expect(layerKey(base)).toBe(createHash('sha256').update(recipe).digest('hex'));
  });

  test('every input changes the key; a secret value reaches it only as its MAC', () => {
    const k = layerKey(base);
    const variants = [
      { parent: `sha256:${'1'.repeat(64)}` },
      { arch: 'arm64' },
      { storageGb: 11 },
      { workspace: '/w' },
      { env: { HOME: '/home' } },
      { secretMacs: secretMacs(KEY, new Map([['tok', 'value-2']])) },
      { secretMacs: secretMacs(KEY, new Map([['tok2', 'value-1']])) },
      { secretMacs: new Map<string, string>() },
      { line: 'apt-get install -y curl ' },
    ];
    for (const v of variants) expect(layerKey({ ...base, ...v })).not.toBe(k);
    // Another server key gives other MACs, so other keys.
    expect(
      layerKey({
        ...base,
        secretMacs: secretMacs(layerSecretKey(Buffer.alloc(32, 8)), new Map([['tok', 'value-1']])),
      }),
    ).not.toBe(k);
    expect([...base.secretMacs.values()].join()).not.toContain('value-1');
  });

  test('JSON arrays do not collide where a string join would', () => {
    fc.assert(
      fc.property(fc.string(), fc.string({ minLength: 1 }), fc.string(), (a, b, c) => {
        // "a" + "b|c" vs "a|b" + "c": the same characters, split differently.
        const one = layerKey({ ...base, workspace: a + b, line: c });
        const two = layerKey({ ...base, workspace: a, line: b + c });
        return one !== two;
      }),
    );
  });

  test('each line chains on the previous key; the first on the base digest', () => {
    const { parent: _p, line: _l, ...rest } = base;
    const keys = layerKeys({ ...rest, baseDigest: base.parent }, ['a', 'b']);
    expect(keys[0]).toBe(layerKey({ ...base, line: 'a' }));
    expect(keys[1]).toBe(layerKey({ ...base, parent: keys[0]!, line: 'b' }));
  });
});

function createHashMac(value: string): string {
  return secretMacs(KEY, new Map([['x', value]])).get('x')!;
}
