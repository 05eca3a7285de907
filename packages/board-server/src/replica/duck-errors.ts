import { homedir } from 'node:os';
import { dirname } from 'node:path';
import { BoardError, boardError } from '../errors.js';

/**
 * DuckDB's errors as tagged errors: permission refusals are `QueryRefused`, the rest `QueryFailed`
 * with DuckDB's message (the feedback a query author needs), in which the node's data directory
 * (two levels above `replicaPath`) and the home directory are blanked to `<data>` (an out-of-memory
 * message, for one, names the temp directory). `BoardError`s pass through.
 */
export function refineDuckError(err: unknown, replicaPath: string): Error {
  if (err instanceof BoardError) return err;
  let message = err instanceof Error ? err.message : String(err);
  for (const dir of [dirname(dirname(replicaPath)), homedir()]) {
    if (dir.length > 1) message = message.split(dir).join('<data>');
  }
  if (/Permission Error|disabled by configuration|configuration has been locked|extension/i.test(message)) {
    return boardError('QueryRefused', message);
  }
  return boardError('QueryFailed', message);
}
