import { describe, expect, it } from 'vitest';
import { isStoreUnavailable } from './store-unavailable.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isStoreUnavailable', () => {
  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a missing Unix socket', withCode('ENOENT', 'connect ENOENT /x/.s.PGSQL.5432')],
    ['a reset connection', withCode('ECONNRESET')],
    ['a connection exception (class 08)', withCode('08006')],
    ['too many connections (class 53)', withCode('53300')],
    ['an administrator shutdown', withCode('57P01')],
    ['a server starting up', withCode('57P03')],
    ['a connection that ended', new Error('Connection terminated unexpectedly')],
    ['a query with no answer', new Error('Query read timeout')],
    ['a pool that could not connect', new Error('timeout exceeded when trying to connect')],
  ])('%s is an outage', (_, err) => {
    expect(isStoreUnavailable(err)).toBe(true);
  });

  it.each([
    ['a syntax error', withCode('42601', 'syntax error at or near "SELEC"')],
    ['a unique violation', withCode('23505', 'duplicate key value')],
    ['a cancelled query', withCode('57014', 'canceling statement due to user request')],
    ['a plain error', new Error('boom')],
    ['a string', 'Connection terminated'],
    ['nothing', undefined],
  ])('%s is not', (_, err) => {
    expect(isStoreUnavailable(err)).toBe(false);
  });
});
