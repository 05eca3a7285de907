/** Time between two samples of an unchanged replica's memory use, in ms. */
const SAMPLE_MS = 1000;

/**
 * The memory each open replica held when it was last sampled (DuckDB's `duckdb_memory()`), and
 * when that was. Sampling costs a DuckDB call under the board's lock, so it is done when the
 * replica changed and otherwise at most once a second per board (see `ReplicaCache.answer`).
 */
export class MemorySamples {
  private readonly bytes = new Map<string, number>();
  private readonly at = new Map<string, number>();

  /** True (and noted as sampled now) when the board's memory is due: it changed, or a second passed. */
  due(board: string, changed: boolean): boolean {
    const now = performance.now();
    if (!changed && now - (this.at.get(board) ?? 0) < SAMPLE_MS) return false;
    this.at.set(board, now);
    return true;
  }

  set(board: string, bytes: number): void {
    this.bytes.set(board, bytes);
  }

  /** Bytes the board's replica held when last sampled (0 before its first sample). */
  of(board: string): number {
    return this.bytes.get(board) ?? 0;
  }

  /** Bytes held by these boards' replicas, as of each one's last sample. */
  total(boards: Iterable<string>): number {
    let sum = 0;
    for (const b of boards) sum += this.of(b);
    return sum;
  }

  forget(board: string): void {
    this.bytes.delete(board);
    this.at.delete(board);
  }
}
