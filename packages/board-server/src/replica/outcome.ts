import type { CacheOutcome, QueryOutcome, SyncResult } from '@board/protocol';
import { EncodedJson } from '../encoded-json.js';
import type { SnapshotResult } from './replica.js';

const COMMA = Buffer.from(',');

/** A query run ahead of its head read: its result or failure, and the watermark it was computed at. */
export type Speculation = { doneAt: number } & (
  | { snapshot: SnapshotResult; at: number }
  | { error: unknown; at: number | undefined }
);

/**
 * A query's outcome around its rows, which are already JSON (written as they are, not re-encoded),
 * in the field order of QueryOutcome.
 */
export function encodeOutcome(
  snapshot: SnapshotResult,
  how: { sync: SyncResult; cache: CacheOutcome; syncMs: number; queryMs: number },
): EncodedJson<QueryOutcome> {
  const { result, watermark } = snapshot;
  const rest: Omit<QueryOutcome, 'result'> = {
    sync: how.sync,
    cache: how.cache,
    syncMs: round(how.syncMs),
    queryMs: round(how.queryMs),
    watermark,
  };
  const tail = JSON.stringify(rest);
  const parts: Buffer[] = [Buffer.from(`{"result":{"columns":${JSON.stringify(result.columns)},"rows":[`)];
  result.chunks.forEach((chunk, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(chunk);
  });
  parts.push(Buffer.from(`]},${tail.slice(1)}`));
  return new EncodedJson<QueryOutcome>(parts);
}

/** The sync of a request that found the replica at its head. */
export function noSync(at: number): SyncResult {
  return { mode: 'none', from: at, to: at, applied: 0 };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
