import { describe, expect, it } from 'vitest';
import { nonFiniteToNull, parseTreeJson } from './parse-tree.js';

describe('parseTreeJson', () => {
  it('reads bare non-finite numbers outside strings as null, and leaves strings alone', () => {
    const text = '{"a":Infinity,"b":[-Infinity,NaN],"s":"Infinity \\" NaN","t":"x\\\\","u":-Infinity}';
    expect(nonFiniteToNull(text)).toBe(
      '{"a":null,"b":[null,null],"s":"Infinity \\" NaN","t":"x\\\\","u":null}',
    );
    expect(parseTreeJson(text)).toEqual({ a: null, b: [null, null], s: 'Infinity " NaN', t: 'x\\', u: null });
  });

  it("refuses a tree it cannot read with QueryRefused, not the JSON parser's message", () => {
    expect(() => parseTreeJson('{"a":')).toThrow(/could not be checked/);
  });
});
