import { describe, expect, test } from 'vitest';
import { protoKeyPath } from './json-body.js';

describe('protoKeyPath', () => {
  test.each([
    ['{}', undefined],
    ['[1, "__proto__", {"a": "__proto__"}]', undefined],
    ['{"__proto__": 1}', '__proto__'],
    ['{"services": {"__proto__": {"image": "x"}}}', 'services.__proto__'],
    ['{"a": [{"b": 1}, {"env": {"__proto__": "v"}}]}', 'a.1.env.__proto__'],
    // An escaped key is the same key once parsed.
    ['{"s": {"\\u005f_proto__": 1}}', 's.__proto__'],
  ])('%s -> %s', (text, path) => {
    expect(protoKeyPath(JSON.parse(text))).toBe(path);
  });

  test('walks nesting deeper than the call stack allows', () => {
    const depth = 200_000;
    const text = `${'{"a":'.repeat(depth)}{"__proto__":null}${'}'.repeat(depth)}`;
    const path = protoKeyPath(JSON.parse(text));
    expect(path?.length).toBe(depth * 2 + '__proto__'.length);
  });
});
