import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Cell } from '@board/protocol';
import type { DuckDBDataChunk, DuckDBMaterializedResult } from '@duckdb/node-api';
import { boardError } from '../errors.js';
import { toCell } from './duck-values.js';

/** Bounds of one query: its deadline and the largest result it may return. */
export interface QueryLimits {
  timeoutMs: number;
  maxRows: number;
  maxBytes: number;
}

/**
 * A query result, already encoded: `chunks` joined with commas are the JSON rows (without the
 * enclosing brackets), `bytes` their size plus separators.
 */
export interface EncodedResult {
  columns: string[];
  rowCount: number;
  bytes: number;
  chunks: Buffer[];
}

/** Rows (DuckDB's vector size) or encoded bytes converted between two turns of the event loop. */
const YIELD_EVERY_ROWS = 2048;
const YIELD_EVERY_BYTES = 256 * 1024;

/**
 * Reads a DuckDB result one data chunk at a time (`next`: a streamed result's fetch, or a
 * materialized result's chunks; null or an empty chunk ends it), converting each row to cells and
 * encoding it to JSON as it goes. Past `limits.maxRows` rows or `limits.maxBytes` encoded bytes it
 * throws `ResultTooLarge` (the caller interrupts the half-read result). After every chunk's worth of
 * rows or bytes the event loop gets a turn, and `deadline()` (which throws once the query's time is
 * up) is checked after every await.
 */
export async function readResult(
  columns: string[],
  next: () => Promise<DuckDBDataChunk | null> | DuckDBDataChunk | null,
  limits: QueryLimits,
  deadline: () => void,
): Promise<EncodedResult> {
  const chunks: Buffer[] = [];
  let rowCount = 0;
  let bytes = 0;
  let rowsAtYield = 0;
  let bytesAtYield = 0;
  const tooLarge = (what: string) =>
    boardError(
      'ResultTooLarge',
      `the result is larger than ${what}; narrow the query (WHERE, LIMIT, fewer columns) or aggregate`,
      { rows: rowCount, bytes },
    );
  for (;;) {
    const chunk = await next();
    deadline();
    if (!chunk || chunk.rowCount === 0) break;
    const n = chunk.rowCount;
    if (rowCount + n > limits.maxRows) throw tooLarge(`${limits.maxRows} rows`);
    const vectors = columns.map((_c, i) => chunk.getColumnVector(i));
    const encoded: string[] = new Array(n);
    for (let r = 0; r < n; r++) {
      const row = JSON.stringify(vectors.map((v) => toCell(v.getItem(r))));
      bytes += Buffer.byteLength(row) + 1;
      if (bytes > limits.maxBytes) throw tooLarge(`${limits.maxBytes} bytes`);
      encoded[r] = row;
    }
    rowCount += n;
    chunks.push(Buffer.from(encoded.join(',')));
    // Let other requests (and /health) run between chunks (a point query's single small chunk
    // needs no extra turn).
    if (rowCount - rowsAtYield >= YIELD_EVERY_ROWS || bytes - bytesAtYield >= YIELD_EVERY_BYTES) {
      await yieldToEventLoop();
      deadline();
      rowsAtYield = rowCount;
      bytesAtYield = bytes;
    }
  }
  return { columns, rowCount, bytes, chunks };
}

/** The chunks of a materialized result, one per call (read synchronously), then null: `next` of {@link readResult}. */
export function materializedChunks(result: DuckDBMaterializedResult): () => DuckDBDataChunk | null {
  let next = 0;
  return () => (next < result.chunkCount ? result.getChunk(next++) : null);
}

/**
 * Splits a batched point lookup's rows (key first, `keyed-lookup.ts`) by key and encodes each key's
 * rows as {@link readResult} would have for that key's statement alone; undefined for a key whose
 * rows exceed the limits.
 */
export function readResultsByKey(
  result: DuckDBMaterializedResult,
  keys: (string | number)[],
  columns: string[],
  limits: QueryLimits,
): (EncodedResult | undefined)[] {
  const rows = new Map<Cell, string[]>(keys.map((k) => [k, []]));
  for (let c = 0; c < result.chunkCount; c++) {
    const chunk = result.getChunk(c);
    const vectors = Array.from({ length: chunk.columnCount }, (_v, i) => chunk.getColumnVector(i));
    const [keyVector, ...rest] = vectors;
    for (let r = 0; r < chunk.rowCount; r++) {
      rows.get(toCell(keyVector!.getItem(r)))?.push(JSON.stringify(rest.map((v) => toCell(v.getItem(r)))));
    }
  }
  return keys.map((k) => {
    const encoded = rows.get(k)!;
    let bytes = 0;
    for (const row of encoded) bytes += Buffer.byteLength(row) + 1;
    if (encoded.length > limits.maxRows || bytes > limits.maxBytes) return undefined;
    return {
      columns,
      rowCount: encoded.length,
      bytes,
      chunks: encoded.length === 0 ? [] : [Buffer.from(encoded.join(','))],
    };
  });
}
