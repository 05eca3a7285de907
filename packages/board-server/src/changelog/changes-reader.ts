import {
  CHANGES_PAGE_BYTES,
  type ChangeRecord,
  type ChangesPage,
  type WalKind,
  type WalPayload,
} from '@board/protocol';
import { type Kysely, sql } from 'kysely';
import { boardError } from '../errors.js';
import type { BoardDb } from '../store/database.js';

/** The board's head and the lowest retained seq (null when no record is retained). */
export async function readBoardHead(
  db: Kysely<BoardDb>,
  board: string,
): Promise<{ head: number; tail: number | null }> {
  const r = await sql<{ head: number; tail: number | null }>`
    SELECT b.head, (SELECT min(seq) FROM board_changes c WHERE c.board_id = b.board_id) AS tail
    FROM board_boards b WHERE b.board_id = ${board}`.execute(db);
  const row = r.rows[0];
  if (!row) throw boardError('UnknownBoard', `unknown board "${board}"`);
  return row;
}

/**
 * When a record was written (ms since the epoch, the writing transaction's time), under a symbol
 * key: metrics read it (change lag), JSON never carries it.
 */
export const COMMITTED_AT: unique symbol = Symbol('committedAt');

/**
 * Records with `after < seq <= upTo`, in order, at most `limit` of them and at most `maxBytes` of
 * payload JSON text (as PostgreSQL prints it) beyond the first: the first record always comes, so a
 * reader always progresses, and the page stops before the record that would take it past
 * `maxBytes`. The sizes are summed in PostgreSQL, so a record past the bound never reaches the node.
 */
export async function readRecords(
  db: Kysely<BoardDb>,
  board: string,
  after: number,
  upTo: number,
  limit: number,
  maxBytes: number = CHANGES_PAGE_BYTES,
): Promise<ChangeRecord[]> {
  const r = await sql<{
    seq: number;
    kind: string;
    payload: WalPayload;
    actor: string | null;
    committed_ms: number;
  }>`
    SELECT c.seq, c.kind, c.payload, c.actor, (extract(epoch FROM c.created_at) * 1000)::float8 AS committed_ms
    FROM (
      SELECT seq, sum(octet_length(payload::text)) OVER (ORDER BY seq) AS upto_bytes,
        row_number() OVER (ORDER BY seq) AS n
      FROM board_changes
      WHERE board_id = ${board} AND seq > ${after} AND seq <= ${upTo}
      ORDER BY seq LIMIT ${limit}
    ) s
    JOIN board_changes c ON c.board_id = ${board} AND c.seq = s.seq
    WHERE s.upto_bytes <= ${maxBytes} OR s.n = 1
    ORDER BY c.seq`.execute(db);
  return r.rows.map((row) => ({
    seq: row.seq,
    kind: row.kind as WalKind,
    payload: row.payload,
    ...(row.actor !== null ? { actor: row.actor } : {}),
    [COMMITTED_AT]: row.committed_ms,
  }));
}

/**
 * `changes.read`: one page of records after `after` (at most `limit`, and about
 * `CHANGES_PAGE_BYTES` beyond the first record, see {@link readRecords}). The cursor is beyond retention (resync)
 * when a record the consumer has not seen was trimmed: `after < head` and the first retained
 * record is not `after + 1`. A cursor above head was never handed out (tag `CursorAhead`).
 */
export async function readChangesPage(
  db: Kysely<BoardDb>,
  board: string,
  after: number,
  limit: number,
): Promise<ChangesPage> {
  const { head } = await readBoardHead(db, board);
  if (after > head) {
    throw boardError('CursorAhead', `cursor ${after} is ahead of board "${board}" head ${head}`);
  }
  if (after === head) return { resync: false, records: [], cursor: after, more: false, head };
  const records = await readRecords(db, board, after, head, limit);
  if (records[0]?.seq !== after + 1) return { resync: true, from: head, head };
  const cursor = records[records.length - 1]?.seq ?? after;
  return { resync: false, records, cursor, more: cursor < head, head };
}
