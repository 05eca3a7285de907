import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { BASE64_RULE, base64Problem, decodeBase64 } from './base64.js';
import { OrchError } from './errors.js';
import { decodeManifestInline } from './services.js';

describe('canonical base64 (base64.ts)', () => {
  test('exactly the strings Node writes for some bytes are accepted, and decode to those bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const text = Buffer.from(bytes).toString('base64');
        expect(base64Problem(text)).toBeUndefined();
        expect(decodeBase64(text)).toEqual(bytes);
      }),
    );
    // Any text: accepted if and only if it is the canonical spelling of what it decodes to.
    const base64ish = fc.string({
      unit: fc.constantFrom(...'AQgwBaz09+/=-_ \n'.split('')),
      maxLength: 12,
    });
    fc.assert(
      fc.property(fc.oneof(base64ish, fc.string({ maxLength: 12 })), (text) => {
        const canonical = Buffer.from(text, 'base64').toString('base64') === text;
        expect(base64Problem(text) === undefined).toBe(canonical);
        expect(decodeBase64(text) !== undefined).toBe(canonical);
      }),
    );
  });

  test.each([
    ['e30=\n', 'it has a line break at character 5 (no whitespace is accepted)'],
    ['e30=\r\n', 'it has a line break at character 5 (no whitespace is accepted)'],
    ['e3 0=', 'it has whitespace at character 3 (no whitespace is accepted)'],
    ['e3-_', 'it has "-" at character 3: that is base64url, not base64'],
    ['e30!', 'it has "!" at character 4, outside the alphabet'],
    ['e30=e30=', '"=" pads only the end, but it is at character 4'],
    ['e===', '"=" pads only the end, but it is at character 2'],
    ['e30', 'its length, 3, is not a multiple of 4 (is "=" padding missing?)'],
    ['e30==', 'its length, 5, is not a multiple of 4 (is "=" padding missing?)'],
    ['e31=', 'not canonical: the unused bits of "1" before the padding must be zero'],
    ['QR==', 'not canonical: the unused bits of "R" before the padding must be zero'],
  ])('%j is refused: %s', (text, why) => {
    expect(base64Problem(text)).toBe(`${BASE64_RULE}: ${why}`);
    expect(decodeBase64(text)).toBeUndefined();
  });

  test('Node would have decoded each of those leniently (the reason for the check)', () => {
    expect(Buffer.from('e30=garbage', 'base64').toString()).toBe('{}');
    expect(base64Problem('e30=garbage')).toBe(
      `${BASE64_RULE}: "=" pads only the end, but it is at character 4`,
    );
  });
});

describe('decodeManifestInline', () => {
  const refusal = (text: string) => {
    try {
      decodeManifestInline(text);
    } catch (err) {
      if (err instanceof OrchError) return [err.code, err.message, err.details];
    }
    return 'accepted';
  };

  test('canonical base64 of UTF-8 is the manifest text', () => {
    const json = '{"version":"1","services":{"db":{"image":"postgres:16"}},"x":"é"}';
    expect(decodeManifestInline(Buffer.from(json).toString('base64'))).toBe(json);
  });

  test('anything else is invalid_argument naming the field', () => {
    const wrapped = Buffer.from(JSON.stringify({ version: '1', pad: 'x'.repeat(80) }))
      .toString('base64')
      .replace(/.{76}/, '$&\n');
    expect(refusal(wrapped)).toEqual([
      'invalid_argument',
      `manifest_inline: ${BASE64_RULE}: it has a line break at character 77 (no whitespace is accepted)`,
      { field: 'manifest_inline' },
    ]);
    expect(refusal('e30=garbage')).toEqual([
      'invalid_argument',
      `manifest_inline: ${BASE64_RULE}: "=" pads only the end, but it is at character 4`,
      { field: 'manifest_inline' },
    ]);
    expect(refusal(Buffer.from([0x7b, 0xff, 0x7d]).toString('base64'))).toEqual([
      'invalid_argument',
      'manifest_inline: the decoded manifest is not UTF-8 text',
      { field: 'manifest_inline' },
    ]);
  });
});
