import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BoardError, mapStoreError, toWireError } from './errors.js';

/** A node-postgres DatabaseError as the driver builds it: PostgreSQL's text in `message`. */
function pgError(code: string, message: string, fields: Record<string, string> = {}): Error {
  return Object.assign(new Error(message), { code, ...fields });
}

describe('the store-error mapper', () => {
  const raw = 'index row requires 12024 bytes, maximum size is 8191';

  it('maps every class input can reach to a tag and a message of its own, never the raw text', () => {
    const cases: [Error, string, RegExp][] = [
      [
        pgError('23505', 'duplicate key value violates unique constraint "board_3_pkey"', {
          constraint: 'board_3_pkey',
          detail: 'Key (id)=(a "b") already exists.',
        }),
        'DuplicateRow',
        /^a row with id "a \\"b\\"" already exists$/,
      ],
      [pgError('54000', raw), 'InvalidInput', /too large for it \(SQLSTATE 54000\)/],
      [pgError('22021', 'invalid byte sequence for encoding "UTF8": 0x00'), 'InvalidInput', /SQLSTATE 22021/],
      [
        pgError('22P05', 'unsupported Unicode escape sequence'),
        'InvalidInput',
        /cannot hold \(SQLSTATE 22P05\)/,
      ],
      [pgError('22008', 'timestamp out of range'), 'InvalidInput', /SQLSTATE 22008/],
      [
        pgError('23502', 'null value in column "id"'),
        'InvalidInput',
        /a constraint failed \(SQLSTATE 23502\)/,
      ],
      [
        pgError('08006', 'connection failure'),
        'Unavailable',
        /^the store is unavailable \(SQLSTATE 08006\); retry later$/,
      ],
      [pgError('57P01', 'terminating connection due to administrator command'), 'Unavailable', /57P01/],
      [pgError('40P01', 'deadlock detected'), 'Unavailable', /40P01/],
      [
        Object.assign(new Error('connect ENOENT /secret/dir/pg/run/.s.PGSQL.5432'), { code: 'ENOENT' }),
        'Unavailable',
        /^the store is unavailable; retry later$/,
      ],
      [pgError('42P01', 'relation "board_9" does not exist'), 'Internal', /^internal error$/],
    ];
    for (const [err, tag, message] of cases) {
      const mapped = mapStoreError(err);
      expect({ tag: mapped.tag, message: mapped.message }).toEqual({
        tag,
        message: expect.stringMatching(message),
      });
      expect(mapped.message).not.toContain(err.message);
    }
    // A duplicate on another constraint is not a duplicate row (nor the caller's doing).
    expect(mapStoreError(pgError('23505', 'dup', { constraint: 'board_changes_pkey' })).tag).toBe('Internal');
  });

  it('passes BoardErrors through and gives Internal a log reference instead of the error text', () => {
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (l: string) => lines.push(l) });
    expect(toWireError(new BoardError('RowNotFound', 'no row'), log)).toEqual({
      tag: 'RowNotFound',
      message: 'no row',
    });
    const internal = toWireError(pgError('XX000', `${raw} at /home/node/.data`), log);
    expect(internal.tag).toBe('Internal');
    const ref = /reference ([0-9a-f]{8})/.exec(internal.message)?.[1];
    expect(ref).toBeDefined();
    expect(internal.message).not.toContain('/home');
    expect(lines.join('')).toContain(`"ref":"${ref}"`);
    expect(lines.join('')).toContain(raw);
  });
});
