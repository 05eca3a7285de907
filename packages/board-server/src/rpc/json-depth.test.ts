import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, tooDeep } from './json-depth.js';

const bytes = (s: string) => Buffer.from(s, 'utf8');

describe('tooDeep', () => {
  it('counts arrays and objects outside strings', () => {
    expect(tooDeep(bytes('{"a":[1,{"b":[]}]}'), 4)).toBe(false);
    expect(tooDeep(bytes('{"a":[1,{"b":[[]]}]}'), 4)).toBe(true);
    expect(tooDeep(bytes('[][][][][]'), 1)).toBe(false);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(tooDeep(bytes('{"sql":"[[[[{{{{"}'), 1)).toBe(false);
    expect(tooDeep(bytes('{"sql":"a\\"[[[[\\\\"}'), 1)).toBe(false);
    expect(tooDeep(bytes('{"sql":"a\\\\"}[[['), 1)).toBe(true);
    expect(tooDeep(bytes('["é[[[", "🎉{{{"]'), 1)).toBe(false);
  });

  it('accepts every input shape of the procedures and refuses past the bound', () => {
    const update = { updates: [{ id: 'a', patch: { title: 'x', n: 1 } }], idempotencyKey: 'k' };
    expect(tooDeep(bytes(JSON.stringify(update)))).toBe(false);
    expect(tooDeep(bytes(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`))).toBe(false);
    expect(tooDeep(bytes(`${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`))).toBe(true);
    expect(tooDeep(bytes('[{'.repeat(40)))).toBe(true);
  });
});
