import { describe, expect, it } from 'vitest';
import { claimsAllow, tokenClaimsSchema } from './claims.js';

describe('claimsAllow', () => {
  const exp = 2_000_000_000;
  it('grants the verbs listed for the board, or for every board with *', () => {
    const c = { boards: { tasks: ['read' as const], '*': ['write' as const] }, exp };
    expect(claimsAllow(c, 'tasks', 'read')).toBe(true);
    expect(claimsAllow(c, 'tasks', 'write')).toBe(true);
    expect(claimsAllow(c, 'other', 'read')).toBe(false);
    expect(claimsAllow(c, 'other', 'write')).toBe(true);
  });
  it('refuses every board but the pinned one', () => {
    const c = { boards: { '*': ['read' as const] }, pin: 'tasks', exp };
    expect(claimsAllow(c, 'tasks', 'read')).toBe(true);
    expect(claimsAllow(c, 'other', 'read')).toBe(false);
  });
  it('does not pick up inherited properties for boards named like Object members', () => {
    const c = { boards: { tasks: ['read' as const] }, exp };
    for (const b of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(claimsAllow(c, b, 'read')).toBe(false);
    }
  });
  it('rejects claims without exp or with unknown verbs', () => {
    expect(tokenClaimsSchema.safeParse({ boards: {} }).success).toBe(false);
    expect(tokenClaimsSchema.safeParse({ boards: { a: ['admin'] }, exp }).success).toBe(false);
    expect(tokenClaimsSchema.safeParse({ boards: { 'bad-id': ['read'] }, exp }).success).toBe(false);
  });
});
