import type pg from 'pg';

/** A board's number and head as the store has them. */
export interface BoardHead {
  boardNo: number;
  head: number;
}

/** One round trip for the heads of every board asked for meanwhile (a named, prepared statement). */
const HEADS = {
  name: 'board-node-heads',
  text: 'SELECT board_id, board_no, head FROM board_boards WHERE board_id = ANY($1::text[])',
};

interface Batch {
  boards: Set<string>;
  done: Promise<Map<string, BoardHead>>;
}

/**
 * Reads boards' heads for the per-request sync, coalescing concurrent requests into one Postgres
 * round trip. The rule that keeps "synced per request": a request only joins a read that is sent
 * after the request arrived. While one read is in flight, requests arriving (for any board) gather
 * in the next batch, which is sent as soon as the one in flight settles. So the head a request gets
 * includes every write acknowledged before the request arrived, exactly as an uncoalesced read would.
 */
export class HeadReader {
  private inFlight: Promise<unknown> | undefined;
  private next: Batch | undefined;

  constructor(private readonly pool: pg.Pool) {}

  /** The board's number and head, read after this call; undefined if the board does not exist. */
  async read(board: string): Promise<BoardHead | undefined> {
    let batch = this.next;
    if (!batch) {
      const boards = new Set<string>();
      const start = this.inFlight ?? Promise.resolve();
      const done = start
        .catch(() => undefined)
        .then(() => {
          // From here on, newcomers join a later batch.
          if (this.next === batch) this.next = undefined;
          return this.query([...boards]);
        });
      batch = { boards, done };
      this.next = batch;
      const settled = done.catch(() => undefined);
      this.inFlight = settled;
      void settled.then(() => {
        if (this.inFlight === settled) this.inFlight = undefined;
      });
      // With nothing in flight the batch is sent on the next microtask turn, with every request
      // that arrived in this one.
    }
    batch.boards.add(board);
    return (await batch.done).get(board);
  }

  private async query(boards: string[]): Promise<Map<string, BoardHead>> {
    const r = await this.pool.query<{ board_id: string; board_no: number; head: number }>({
      ...HEADS,
      values: [boards],
    });
    const heads = new Map<string, BoardHead>();
    for (const row of r.rows) {
      heads.set(row.board_id, { boardNo: Number(row.board_no), head: Number(row.head) });
    }
    return heads;
  }
}
