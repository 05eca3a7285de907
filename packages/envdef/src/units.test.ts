import { describe, expect, test } from 'vitest';
import { parseDuration, parseSize } from './units.js';

describe('parseSize', () => {
  test.each([
    ['2GiB', 'MiB', 2048],
    ['512MiB', 'MiB', 512],
    ['1TiB', 'GiB', 1024],
    ['10GiB', 'GiB', 10],
    ['4096000MB', 'MiB', 3_906_250],
    ['1TB', 'MiB', undefined],
    ['1GB', 'MiB', undefined],
  ] as const)('%s in %s', (text, unit, want) => {
    const got = parseSize(text, unit);
    if (want === undefined) expect(got).toEqual({ problem: { kind: 'not-whole', unit } });
    else expect(got).toEqual({ value: want });
  });

  test.each(['2048', '2 GiB', '0GiB', '-1GiB', '1.5GiB', '2gib', '2KiB', 'GiB', '', '2GiB '])(
    'malformed: %j',
    (text) => {
      expect(parseSize(text, 'MiB')).toEqual({ problem: { kind: 'malformed' } });
    },
  );
});

describe('parseDuration', () => {
  test.each([
    ['90s', 90],
    ['30m', 1800],
    ['1h30m', 5400],
    ['2d', 172_800],
    ['1d2h3m4s', 93_784],
    ['3600', 3600],
    ['0h5m', 300],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  test.each(['0', '0s', '', '30m1h', '1.5h', '1h 30m', '1w', 'h', '-5s', '5S', '1h1h'])(
    'malformed: %j',
    (text) => {
      expect(parseDuration(text)).toBeUndefined();
    },
  );
});
