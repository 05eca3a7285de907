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

/** DuckDB's text for an error (node-api errors are plain `Error`s). */
function duckMessage(err: unknown): string {
  return err instanceof Error ? err.message : typeof err === 'string' ? err : '';
}

/**
 * True when `err` is a DuckDB fatal error: the database instance is invalidated ("FATAL Error",
 * "database has been invalidated") and answers nothing until it is closed and opened again. A
 * `QueryFailed` carrying that text (the read path's refinement) counts too.
 */
export function isFatalDuckError(err: unknown): boolean {
  if (err instanceof BoardError && err._tag !== 'QueryFailed') return false;
  return /FATAL Error|database has been invalidated/.test(duckMessage(err));
}

/**
 * A failure of the sync path (catch-up, rebuild) as a tagged error: DuckDB out of memory is
 * `OutOfMemory`, another fatal DuckDB error `ReplicaUnavailable`; anything else (a `BoardError`, a
 * store error for the store-error mapper) is returned as it is. Nothing was half-applied either
 * way: a batch is one DuckDB transaction, and a failed rebuild's files are removed.
 */
export function refineSyncError(err: unknown, board: string, memoryLimitMb: number): unknown {
  if (err instanceof BoardError) return err;
  const message = duckMessage(err);
  if (/Out of Memory Error/.test(message)) {
    return boardError(
      'OutOfMemory',
      `the replica of board "${board}" needed more than its ${memoryLimitMb} MB DuckDB memory limit while syncing; nothing was half-applied; the replica is rebuilt from the store on a request after the board changes or a minute passes (raise BOARD_REPLICA_MEMORY_MB if this persists)`,
    );
  }
  if (isFatalDuckError(err)) {
    return boardError(
      'ReplicaUnavailable',
      `the replica of board "${board}" failed (DuckDB fatal error) while syncing; it was discarded and is rebuilt from the store on a request after the board changes or a minute passes`,
    );
  }
  return err;
}
