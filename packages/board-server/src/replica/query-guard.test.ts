import { describe, expect, it } from 'vitest';
import { bindPlaceholders, isReadStatement, leadingKeyword } from './query-guard.js';

describe('query guard', () => {
  it('binds declared placeholders to the board table and nothing else', () => {
    expect(
      bindPlaceholders('SELECT * FROM {{a}} JOIN {{b}} USING (id)', [
        { token: 'a', entity: 'items' },
        { token: 'b', entity: 'items' },
      ]),
    ).toBe('SELECT * FROM "items" JOIN "items" USING (id)');
    expect(() => bindPlaceholders('SELECT * FROM {{x}}', [])).toThrow(/not bound/);
    expect(() => bindPlaceholders('SELECT 1', [{ token: 'a', entity: 'users' }])).toThrow(/unknown entity/);
  });
  it('finds the leading keyword past comments and parentheses', () => {
    expect(leadingKeyword('  /* c */ -- line\n ((select 1))')).toBe('SELECT');
    expect(leadingKeyword('/* unterminated')).toBe('');
    expect(isReadStatement('PRAGMA database_list')).toBe(false);
    expect(isReadStatement('SHOW tables')).toBe(false);
    expect(isReadStatement('with x as (select 1) select * from x')).toBe(true);
  });
});
