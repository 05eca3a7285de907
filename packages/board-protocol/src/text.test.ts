import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tokenClaimsSchema } from './claims.js';
import { PROCEDURES } from './procedures.js';

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
});
