import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type {
  Cell,
  ChangeRecord,
  ColumnDef,
  DeletePayload,
  InsertPayload,
  Row,
  UpdatePayload,
} from '@board/protocol';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DUCK_TYPES } from '../boards/columns.js';
import { toCell } from './duck-values.js';
import type { KeyedLookup } from './keyed-lookup.js';
import { REPLICA_TABLE } from './query-guard.js';
import type { EncodedResult, QueryLimits } from './result-reader.js';

/**
 * Bytes the index counts per row on top of its strings' characters: the Map entry and two string
 * headers (V8, 64-bit). Measured (Node 20, `--expose-gc`): a Map of 1M rows shaped as
 * `bench/board.mjs s`'s (7-character ids, 40-character rows, 46.6 M characters) grew the heap by
 * 150 MiB, 111 bytes a row beyond the characters.
 */
const ROW_OVERHEAD_BYTES = 112;

/** How a point lookup's result is cut from a row of the index: the cells of the table it projects. */
export interface IndexPlan {
  /** Result column names, as DuckDB named them when it ran the statement. */
  columns: string[];
  /** Table column positions, in result order; undefined: the whole row (`SELECT *`). */
  picks: number[] | undefined;
}

/**
 * An index of a replica's rows by `id`, kept beside DuckDB (README, "Point reads from the key
 * index"): each row as the JSON array of its cells, in table order, exactly as DuckDB's `SELECT *`
 * encodes it (`toCell`, `JSON.stringify`). It is built from a DuckDB scan of the table at the
 * replica's watermark and then kept by the same change batches that DuckDB applies, after each
 * batch's commit, in the same synchronous step that moves the replica's watermark: so the index is
 * always at the replica's watermark, and a lookup answers from the state a DuckDB query would read
 * at that watermark. A batch the index cannot mirror exactly (a `schema` record, an update of an id
 * it does not hold) drops the index; it is rebuilt from DuckDB.
 *
 * Ids are unique in the base table (PostgreSQL's primary key), so a committed state holds at most
 * one row per id; within a batch an id may be deleted and inserted again, which the index applies
 * in order.
 */
export class KeyIndex {
  private readonly rows = new Map<string, string>();
  private chars = 0;

  private constructor(private readonly columns: ColumnDef[]) {}

  /**
   * Reads the whole table on `conn` (the caller holds the board's lock, so no batch applies
   * meanwhile) and indexes it; undefined when its estimated size passes `maxBytes` (the replica
   * then serves every read from DuckDB). The event loop gets a turn after every data chunk.
   */
  static async build(
    conn: DuckDBConnection,
    columns: ColumnDef[],
    maxBytes: number,
  ): Promise<KeyIndex | undefined> {
    const index = new KeyIndex(columns);
    const stream = await conn.stream(`SELECT * FROM ${REPLICA_TABLE}`);
    const width = 3 + columns.length;
    if (stream.columnCount !== width) return undefined;
    for (;;) {
      const chunk = await stream.fetchChunk();
      if (!chunk || chunk.rowCount === 0) break;
      const vectors = Array.from({ length: width }, (_v, i) => chunk.getColumnVector(i));
      for (let r = 0; r < chunk.rowCount; r++) {
        const cells = vectors.map((v) => toCell(v.getItem(r)));
        const id = cells[0];
        if (typeof id !== 'string') return undefined;
        index.put(id, JSON.stringify(cells));
      }
      if (index.bytes > maxBytes) return undefined;
      await yieldToEventLoop();
    }
    return index;
  }

  /** Estimated memory the index holds, in bytes (one-byte strings; see {@link ROW_OVERHEAD_BYTES}). */
  get bytes(): number {
    return this.chars + this.rows.size * ROW_OVERHEAD_BYTES;
  }

  /** Rows indexed. */
  get size(): number {
    return this.rows.size;
  }

  /**
   * Applies a committed change batch (consecutive records) as `applyChanges` applied it to DuckDB;
   * false when it cannot mirror it exactly (the caller drops the index).
   */
  apply(records: ChangeRecord[]): boolean {
    for (const rec of records) {
      switch (rec.kind) {
        case 'insert': {
          const p = rec.payload as InsertPayload;
          for (const row of p.rows) {
            const id = row.id;
            if (typeof id !== 'string') return false;
            this.put(id, JSON.stringify(this.insertCells(row, p.updatedAt)));
          }
          break;
        }
        case 'update': {
          const p = rec.payload as UpdatePayload;
          for (const u of p.updates) {
            const old = this.rows.get(u.id);
            if (old === undefined) return false;
            const cells = JSON.parse(old) as Cell[];
            cells[1] = p.updatedAt;
            for (const [name, value] of Object.entries(u.patch)) {
              // As `applyChanges` does: names exactly as declared, unknown ones skipped.
              const i = this.columns.findIndex((c) => c.name === name);
              const at = name === 'state' ? 2 : i < 0 ? undefined : 3 + i;
              if (at === undefined) continue;
              cells[at] = value;
            }
            this.put(u.id, JSON.stringify(cells));
          }
          break;
        }
        case 'delete': {
          for (const id of (rec.payload as DeletePayload).ids) this.remove(id);
          break;
        }
        default:
          // `schema`: every row gains a column; the index is rebuilt from DuckDB instead.
          return false;
      }
    }
    return true;
  }

  /**
   * The result of a point lookup by `id` planned as `plan`, encoded as DuckDB's path encodes it
   * (`readResult`); undefined when it is beyond `limits` (the caller runs the statement in DuckDB,
   * for the exact `ResultTooLarge`).
   */
  lookup(id: string, plan: IndexPlan, limits: QueryLimits): EncodedResult | undefined {
    const row = this.rows.get(id);
    if (row === undefined) return { columns: plan.columns, rowCount: 0, bytes: 0, chunks: [] };
    const text = plan.picks === undefined ? row : pick(row, plan.picks);
    const bytes = Buffer.byteLength(text) + 1;
    if (limits.maxRows < 1 || bytes > limits.maxBytes) return undefined;
    return { columns: plan.columns, rowCount: 1, bytes, chunks: [Buffer.from(text)] };
  }

  /**
   * How the index answers a point lookup, or undefined when it cannot: the statement must be keyed
   * by `id` and select `*` or table columns, and DuckDB's own run of it (`columns`, `types`) must
   * show exactly those columns with the board's types.
   */
  plan(lookup: KeyedLookup, columns: string[], types: string[]): IndexPlan | undefined {
    if (lookup.key.toLowerCase() !== 'id' || lookup.kind !== 'text') return undefined;
    const all = [0, 1, 2, ...this.columns.map((_c, i) => 3 + i)];
    const picks: number[] = [];
    for (const item of lookup.select) {
      if (item.star) picks.push(...all);
      else {
        const at = this.position(item.column);
        if (at === undefined) return undefined;
        picks.push(at);
      }
    }
    const tableTypes = ['VARCHAR', 'TIMESTAMP', 'VARCHAR', ...this.columns.map((c) => DUCK_TYPES[c.type])];
    if (picks.length !== columns.length || picks.length !== types.length) return undefined;
    if (!picks.every((p, i) => tableTypes[p] === types[i])) return undefined;
    const whole = picks.length === all.length && picks.every((p, i) => p === i);
    return { columns, picks: whole ? undefined : picks };
  }

  /** A column's position in the table (case-insensitive, as DuckDB resolves names). */
  private position(name: string): number | undefined {
    const n = name.toLowerCase();
    if (n === 'id') return 0;
    if (n === 'updated_at') return 1;
    if (n === 'state') return 2;
    const i = this.columns.findIndex((c) => c.name.toLowerCase() === n);
    return i < 0 ? undefined : 3 + i;
  }

  /** An inserted row's cells, as `appendRow` writes them to DuckDB and `toCell` reads them back. */
  private insertCells(row: Row, updatedAt: number): Cell[] {
    return [row.id ?? null, updatedAt, row.state ?? null, ...this.columns.map((c) => row[c.name] ?? null)];
  }

  private put(id: string, row: string): void {
    const old = this.rows.get(id);
    if (old !== undefined) this.chars -= id.length + old.length;
    this.rows.set(id, row);
    this.chars += id.length + row.length;
  }

  private remove(id: string): void {
    const old = this.rows.get(id);
    if (old === undefined) return;
    this.rows.delete(id);
    this.chars -= id.length + old.length;
  }
}

/** The cells at `picks` of a row's JSON, as JSON. */
function pick(row: string, picks: number[]): string {
  const cells = JSON.parse(row) as Cell[];
  return JSON.stringify(picks.map((p) => cells[p] ?? null));
}
