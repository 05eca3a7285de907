import { randomBytes } from 'node:crypto';
import { BoardError, type ErrorTag } from '@board/protocol';
import { isStoreUnavailable } from '@support/pg';
import type { Logger } from './log.js';

export { BoardError } from '@board/protocol';

/**
 * Shorthand for the one error class (`@board/protocol`'s `BoardError`): handlers throw it,
 * `rpc/app.ts` maps it to HTTP and the envelope in one place.
 * @example throw boardError('UnknownBoard', 'no board "x"')
 */
export function boardError(tag: ErrorTag, message: string, details?: Record<string, unknown>): BoardError {
  return new BoardError(tag, message, details ? { details } : {});
}

/** What a PostgreSQL error (node-postgres `DatabaseError`) carries that the mapper reads. */
interface PgErrorFields {
  code?: unknown;
  detail?: unknown;
  constraint?: unknown;
}

/** PostgreSQL's names of the SQLSTATE classes input can reach, for messages (never its raw text). */
const DATA_EXCEPTIONS: Record<string, string> = {
  '22001': 'a string is too long',
  '22003': 'a number is out of range',
  '22007': 'a date or time is malformed',
  '22008': 'a date or time is out of range',
  '22021': 'a string holds a byte sequence the store cannot encode',
  '22P02': 'a value has the wrong form for its column',
  '22P05': 'a string holds a character the store cannot hold',
};

/**
 * The store-error mapper: every error class of PostgreSQL (SQLSTATE) or of the connection that a
 * request can run into, as a tag and a message of our own. No raw database message reaches a
 * client: messages name the class and SQLSTATE; the node's log has the original.
 *
 * | SQLSTATE / error                                  | tag            |
 * | ------------------------------------------------- | -------------- |
 * | 23505 on a board table's primary key              | `DuplicateRow` (names the id) |
 * | 22xxx data exception, 23xxx other integrity but 23505 | `InvalidInput` |
 * | 54xxx program limit (e.g. an index row too large) | `InvalidInput` |
 * | `@support/pg`'s `isStoreUnavailable` (08, 53, 57P01-05, socket errors, ...); 40001, 40P01 | `Unavailable` |
 * | anything else                                     | `Internal` (with a log reference) |
 */
export function mapStoreError(err: unknown): { tag: ErrorTag; message: string; level: 'warn' | 'error' } {
  const fields = (typeof err === 'object' && err !== null ? err : {}) as PgErrorFields;
  const code = typeof fields.code === 'string' ? fields.code : '';
  if (
    code === '23505' &&
    typeof fields.constraint === 'string' &&
    /^board_\d+_pkey$/.test(fields.constraint)
  ) {
    const id = /^Key \(id\)=\((.*)\) already exists\.$/s.exec(String(fields.detail ?? ''))?.[1];
    return {
      tag: 'DuplicateRow',
      message:
        id === undefined
          ? 'a row with one of these ids already exists'
          : `a row with id ${JSON.stringify(id)} already exists`,
      level: 'warn',
    };
  }
  if (/^2[23]/.test(code) && code !== '23505') {
    const what =
      DATA_EXCEPTIONS[code] ?? (code.startsWith('22') ? 'a value is invalid' : 'a constraint failed');
    return {
      tag: 'InvalidInput',
      message: `the store refused the request: ${what} (SQLSTATE ${code})`,
      level: 'warn',
    };
  }
  if (code.startsWith('54')) {
    return {
      tag: 'InvalidInput',
      message: `the store refused the request: a value or the request is too large for it (SQLSTATE ${code})`,
      level: 'warn',
    };
  }
  if (isStoreUnavailable(err) || code === '40001' || code === '40P01') {
    return {
      tag: 'Unavailable',
      message: `the store is unavailable${/^[0-9][0-9A-Z]{4}$/.test(code) ? ` (SQLSTATE ${code})` : ''}; retry later`,
      level: 'warn',
    };
  }
  return { tag: 'Internal', message: 'internal error', level: 'error' };
}

/**
 * Tag and message of any error: our own `BoardError`s as they are, everything else through
 * {@link mapStoreError}; `Internal` messages carry a reference that the log line repeats. The HTTP
 * side (`rpc/app.ts` onError) and the SSE side (`watch/watch-stream.ts` error event) both go
 * through here.
 */
export function toWireError(err: unknown, log: Logger): { tag: ErrorTag; message: string } {
  if (err instanceof BoardError) return { tag: err._tag as ErrorTag, message: err.message };
  const mapped = mapStoreError(err);
  if (mapped.tag === 'Internal') {
    const ref = randomBytes(4).toString('hex');
    log.error({ err, ref }, 'unexpected error');
    return { tag: 'Internal', message: `internal error (reference ${ref} in the node's log)` };
  }
  log[mapped.level]({ err, tag: mapped.tag }, 'store error');
  return { tag: mapped.tag, message: mapped.message };
}
