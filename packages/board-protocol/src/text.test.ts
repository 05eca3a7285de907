import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tokenClaimsSchema } from './claims.js';
import { PROCEDURES } from './procedures.js';
import { MAX_MUTATION_TEXT_BYTES, MAX_TEXT_CELL_BYTES, utf8Length } from './text.js';

const issue = (r: { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }) => {
  const i = r.error?.issues[0];
  return i ? `${i.path.join('.')}: ${i.message}` : 'ok';
};

describe('the text rule and id patterns', () => {
  const insert = PROCEDURES['mutate.insert'].input;
  const update = PROCEDURES['mutate.update'].input;
  const del = PROCEDURES['mutate.delete'].input;
  const query = PROCEDURES['query.execute'].input;

  it('refuses NUL anywhere a request carries text, naming where', () => {
    const nul = 'a\u0000b';
    expect(issue(insert.safeParse({ rows: [{ id: nul }] }))).toBe(
      'rows.0.id: cell must not contain NUL (U+0000)',
    );
    expect(issue(insert.safeParse({ rows: [{ id: 'a', title: nul }] }))).toBe(
      'rows.0.title: cell must not contain NUL (U+0000)',
    );
    expect(issue(insert.safeParse({ rows: [{ id: 'a', [nul]: 1 }] }))).toBe(
      'rows.0: column name must not contain NUL (U+0000)',
    );
    expect(issue(insert.safeParse({ rows: [{ id: 'a' }], idempotencyKey: nul }))).toBe(
      'idempotencyKey: idempotency key must not contain NUL (U+0000)',
    );
    expect(issue(del.safeParse({ ids: ['ok', nul] }))).toBe('ids.1: row id must not contain NUL (U+0000)');
    expect(issue(update.safeParse({ updates: [{ id: nul, patch: {} }] }))).toBe(
      'updates.0.id: row id must not contain NUL (U+0000)',
    );
    expect(issue(update.safeParse({ updates: [{ id: 'a', patch: { state: nul } }] }))).toBe(
      'updates.0.patch.state: cell must not contain NUL (U+0000)',
    );
    expect(issue(query.safeParse({ sql: `SELECT 1${nul}` }))).toBe('sql: sql must not contain NUL (U+0000)');
    expect(issue(query.safeParse({ sql: 'SELECT $1', params: [nul] }))).toBe(
      'params.0: cell must not contain NUL (U+0000)',
    );
    expect(tokenClaimsSchema.safeParse({ boards: {}, exp: 1, sub: nul }).success).toBe(false);
  });

  it('refuses lone surrogates', () => {
    expect(issue(insert.safeParse({ rows: [{ id: 'a', t: '\ud800' }] }))).toBe(
      'rows.0.t: cell must be well-formed Unicode (no lone surrogate)',
    );
    expect(insert.safeParse({ rows: [{ id: '😀', t: 'é😀' }] }).success).toBe(true);
  });

  it('bounds row ids and idempotency keys by characters, without control characters', () => {
    expect(insert.safeParse({ rows: [{ id: '😀'.repeat(256) }] }).success).toBe(true);
    expect(issue(insert.safeParse({ rows: [{ id: 'x'.repeat(257) }] }))).toBe(
      'rows.0.id: row id: row ids are 1 to 256 characters without control characters (got 257 characters)',
    );
    expect(issue(insert.safeParse({ rows: [{ id: 'x'.repeat(1_000_000) }] }))).toMatch(
      /^rows\.0\.id: .*got 1000000 characters/,
    );
    expect(issue(del.safeParse({ ids: [''] }))).toMatch(/^ids\.0: row id: row ids are 1 to 256/);
    expect(issue(del.safeParse({ ids: ['a\nb'] }))).toMatch(/^ids\.0: row id: /);
    expect(issue(update.safeParse({ updates: [{ id: 'x'.repeat(300), patch: {} }] }))).toMatch(
      /^updates\.0\.id: row id: /,
    );
    expect(insert.safeParse({ rows: [{ id: 'a' }], idempotencyKey: 'k'.repeat(200) }).success).toBe(true);
    expect(issue(insert.safeParse({ rows: [{ id: 'a' }], idempotencyKey: 'k'.repeat(201) }))).toMatch(
      /^idempotencyKey: idempotency key: /,
    );
  });

  it('accepts every well-formed NUL-free string as a cell, and refuses every string with NUL', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        const ok = insert.safeParse({ rows: [{ id: 'a', t: s }] }).success;
        expect(ok).toBe(!s.includes('\u0000'));
      }),
      { seed: 7, numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), (a, b) => {
        expect(insert.safeParse({ rows: [{ id: 'a', t: `${a}\u0000${b}` }] }).success).toBe(false);
        expect(del.safeParse({ ids: [`${a}\u0000${b}`] }).success).toBe(false);
      }),
      { seed: 7, numRuns: 300 },
    );
  });

  it('bounds a text cell by its UTF-8 bytes, in inserted rows and update patches alike', () => {
    const at = 'x'.repeat(MAX_TEXT_CELL_BYTES);
    expect(issue(insert.safeParse({ rows: [{ id: 'a', t: at }] }))).toBe('ok');
    expect(issue(insert.safeParse({ rows: [{ id: 'a', t: `${at}x` }] }))).toMatch(
      /^rows\.0\.t: a text cell holds at most 65536 bytes of UTF-8/,
    );
    // Two bytes each: half as many characters fit; a surrogate pair (one emoji) is four bytes.
    const e = '\u00e9'.repeat(MAX_TEXT_CELL_BYTES / 2);
    expect(issue(update.safeParse({ updates: [{ id: 'a', patch: { t: e } }] }))).toBe('ok');
    expect(issue(update.safeParse({ updates: [{ id: 'a', patch: { t: `${e}x` } }] }))).toMatch(
      /^updates\.0\.patch\.t: a text cell holds at most/,
    );
    expect(utf8Length('a\u00e9\u20ac\u{1f600}')).toBe(1 + 2 + 3 + 4);
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        expect(utf8Length(s)).toBe(new TextEncoder().encode(s).length);
      }),
      { seed: 7, numRuns: 300 },
    );
    // A huge cell is refused without scanning it (the count stops past the bound).
    expect(insert.safeParse({ rows: [{ id: 'a', t: 'x'.repeat(60_000_000) }] }).success).toBe(false);
    // Query parameters are not stored: they are bounded by the body only.
    expect(issue(query.safeParse({ sql: 'SELECT $1', params: [`${at}x`] }))).toBe('ok');
  });

  it('bounds the text one mutation stores, over all its rows or patches', () => {
    const cell = 'x'.repeat(MAX_TEXT_CELL_BYTES);
    const n = MAX_MUTATION_TEXT_BYTES / MAX_TEXT_CELL_BYTES;
    const rows = (k: number) => Array.from({ length: k }, (_, i) => ({ id: `r${i}`, t: cell }));
    // Every string cell counts, ids included: n - 1 full cells and their ids fit, n do not.
    expect(issue(insert.safeParse({ rows: rows(n - 1) }))).toBe('ok');
    expect(issue(insert.safeParse({ rows: rows(n) }))).toMatch(
      /^: a mutation stores at most 8388608 bytes of UTF-8 text in its cells \(got 83\d{5}\); split it$/,
    );
    const updates = rows(n + 1).map((r) => ({ id: r.id, patch: { t: r.t } }));
    expect(update.safeParse({ updates }).success).toBe(false);
  });

  it('keeps every column name a row carries, __proto__ included, without touching any prototype', () => {
    const parsed = insert.parse(JSON.parse('{"rows":[{"id":"u15","__proto__":"x","constructor":"y"}]}'));
    const row = parsed.rows[0] as Record<string, unknown>;
    expect(Object.keys(row)).toEqual(['id', '__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toBe('x');
    expect(Object.getPrototypeOf(row)).toBe(null);
    expect(JSON.stringify(row)).toBe('{"id":"u15","__proto__":"x","constructor":"y"}');
    const polluted = JSON.parse('{"updates":[{"id":"a","patch":{"__proto__":{"polluted":true}}}]}');
    expect(update.safeParse(polluted).success).toBe(false); // an object is no cell
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(issue(insert.safeParse({ rows: [[1]] }))).toBe(
      'rows.0: expected an object of column name to cell',
    );
  });
});
