import type { DuckDBPreparedStatement } from '@duckdb/node-api';

/**
 * Prepared statements by SQL text, each with the replica generation it was planned at: DuckDB bakes
 * table statistics into a plan (a perfect-hash GROUP BY sizes its table from min/max), so a plan is
 * reused only while no change batch was applied since, and re-planned after one. A statement
 * planned in a snapshot transaction (generation unknown: a batch was being applied) is not kept.
 * Least recently used out beyond `capacity` (destroyed, and `onEvict` told).
 */
export class PlanCache {
  private readonly plans = new Map<string, { prepared: DuckDBPreparedStatement; generation: number }>();

  constructor(
    private readonly capacity: number,
    private readonly onEvict: (sqlText: string) => void = () => undefined,
  ) {}

  /** The statement planned at `generation`, else undefined (one planned earlier is destroyed). */
  take(sqlText: string, generation: number | undefined): DuckDBPreparedStatement | undefined {
    const cached = this.plans.get(sqlText);
    if (!cached || generation === undefined) return undefined;
    this.plans.delete(sqlText);
    if (cached.generation === generation) {
      this.plans.set(sqlText, cached);
      return cached.prepared;
    }
    cached.prepared.destroySync();
    return undefined;
  }

  /** Keeps `prepared`, planned at `generation`; with that unknown, the caller owns it. */
  keep(
    sqlText: string,
    generation: number | undefined,
    prepared: DuckDBPreparedStatement,
  ): DuckDBPreparedStatement {
    if (generation === undefined) return prepared;
    this.plans.get(sqlText)?.prepared.destroySync();
    this.plans.delete(sqlText);
    this.plans.set(sqlText, { prepared, generation });
    if (this.plans.size > this.capacity) {
      const oldest = this.plans.keys().next().value as string;
      this.plans.get(oldest)?.prepared.destroySync();
      this.plans.delete(oldest);
      this.onEvict(oldest);
    }
    return prepared;
  }

  /** Destroys every kept statement. */
  clear(): void {
    for (const p of this.plans.values()) p.prepared.destroySync();
    this.plans.clear();
  }
}
