import type { Kysely } from 'kysely';
import { readRecords } from '../changelog/changes-reader.js';
import type { BoardDb } from '../store/database.js';
import type { Replica } from './replica.js';

/** Change records read per page while catching up. */
const CHANGE_PAGE = 500;

/**
 * Brings `replica` from its watermark to `head` by applying the board's change records
 * (watermark, head] in order; returns how many it applied, or -1 when the log no longer reaches
 * back to the replica's watermark (trimmed by retention: then the replica is rebuilt instead).
 */
export async function catchUpReplica(
  db: Kysely<BoardDb>,
  board: string,
  replica: Replica,
  head: number,
): Promise<number> {
  let applied = 0;
  while (replica.watermark < head) {
    const records = await readRecords(db, board, replica.watermark, head, CHANGE_PAGE);
    if (records[0]?.seq !== replica.watermark + 1) return -1;
    await replica.apply(records);
    applied += records.length;
  }
  return applied;
}
