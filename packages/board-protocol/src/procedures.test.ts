import { describe, expect, it } from 'vitest';
import { isBoardId } from './board-id.js';
import { ERROR_TAGS } from './errors.js';
import { isProcedureName, PROCEDURES, queryExecuteInput } from './procedures.js';

describe('the wire contract', () => {
  it('names exactly the six procedures of the spec, each with a verb', () => {
    expect(Object.keys(PROCEDURES).sort()).toEqual(
      [
        'changes.read',
        'mutate.delete',
        'mutate.insert',
        'mutate.update',
        'node.stats',
        'query.execute',
      ].sort(),
    );
    expect(isProcedureName('constructor')).toBe(false);
    expect(PROCEDURES['node.stats'].verb).toBe('read');
  });
  it('validates board ids by pattern', () => {
    expect(isBoardId('a'.repeat(64))).toBe(true);
    expect(isBoardId('a'.repeat(65))).toBe(false);
    for (const bad of ['', 'a-b', 'a b', 'a;drop', 'é', 'a\n']) expect(isBoardId(bad)).toBe(false);
  });
  it('defaults query params and tables, and checks token names', () => {
    expect(queryExecuteInput.parse({ sql: 'select 1' })).toEqual({ sql: 'select 1', tables: [], params: [] });
    expect(
      queryExecuteInput.safeParse({ sql: 'x', tables: [{ token: 'a'.repeat(33), entity: 'items' }] }).success,
    ).toBe(false);
    expect(queryExecuteInput.safeParse({ sql: 'x', params: [{}] }).success).toBe(false);
  });
  it('maps the Errors table statuses', () => {
    expect(ERROR_TAGS).toMatchObject({
      Unauthenticated: 401,
      MissingBoardEnvelope: 401,
      Forbidden: 403,
      UnknownProcedure: 404,
      InvalidInput: 400,
    });
  });
});

describe('retry eligibility (one rule for client and router)', () => {
  it('allows reads always, mutations only when keyed, unknown procedures never', async () => {
    const { mayRetry, isIdempotentMark } = await import('./procedures.js');
    expect(['query.execute', 'changes.read', 'node.stats'].map((p) => mayRetry(p, false))).toEqual([
      true,
      true,
      true,
    ]);
    expect(['mutate.insert', 'mutate.update', 'mutate.delete'].map((p) => mayRetry(p, false))).toEqual([
      false,
      false,
      false,
    ]);
    expect(['mutate.insert', 'mutate.update', 'mutate.delete'].map((p) => mayRetry(p, true))).toEqual([
      true,
      true,
      true,
    ]);
    expect(mayRetry('unknown.proc', true)).toBe(false);
    expect(mayRetry('constructor', true)).toBe(false);
    expect([undefined, '', 'false', 'true', '1'].map((v) => isIdempotentMark(v))).toEqual([
      false,
      false,
      false,
      true,
      true,
    ]);
  });
  it('carries the router tags and ResultTooLarge with their statuses', () => {
    expect(ERROR_TAGS).toMatchObject({
      NoNodeAvailable: 503,
      NodeFailed: 502,
      RouterTimeout: 504,
      ResultTooLarge: 200,
    });
  });
});
