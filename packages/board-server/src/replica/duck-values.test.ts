import type { Cell } from '@board/protocol';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toCell } from './duck-values.js';

/**
 * The cell each DuckDB type becomes in a query result (README, "Result values"), on values DuckDB
 * itself computes: numbers for numeric types, epoch microseconds for `TIMESTAMP` with or without a
 * time zone, and the text form for everything else (times of day included, with their offset).
 */
describe('toCell', () => {
  let instance: DuckDBInstance;
  let conn: DuckDBConnection;
  const cell = async (expr: string): Promise<Cell> => {
    const result = await conn.run(`SELECT ${expr}`);
    const chunk = await result.fetchChunk();
    return toCell(chunk?.getColumnVector(0).getItem(0));
  };
  const text = async (expr: string): Promise<Cell> => await cell(`(${expr})::VARCHAR`);

  beforeAll(async () => {
    instance = await DuckDBInstance.create(':memory:');
    conn = await instance.connect();
  });
  afterAll(() => {
    conn.closeSync();
    instance.closeSync();
  });

  it('encodes integers as numbers, and as decimal strings beyond 2^53', async () => {
    expect(await cell('42::TINYINT')).toBe(42);
    expect(await cell('255::UTINYINT')).toBe(255);
    expect(await cell('-2147483649::BIGINT')).toBe(-2147483649);
    expect(await cell('9007199254740991::BIGINT')).toBe(9007199254740991);
    expect(await cell('9007199254740992::BIGINT')).toBe('9007199254740992');
    expect(await cell('-9007199254740992::BIGINT')).toBe('-9007199254740992');
    expect(await cell('18446744073709551615::UBIGINT')).toBe('18446744073709551615');
    expect(await cell('170141183460469231731687303715884105727::HUGEINT')).toBe(
      '170141183460469231731687303715884105727',
    );
  });

  it('encodes DOUBLE, FLOAT and DECIMAL as numbers, non-finite ones as strings', async () => {
    expect(await cell('0.1::DOUBLE')).toBe(0.1);
    expect(await cell('5e-324::DOUBLE')).toBe(5e-324);
    expect(await cell('1e20::DOUBLE')).toBe(1e20);
    expect(await cell('1.5::FLOAT')).toBe(1.5);
    expect(await cell('1.50::DECIMAL(10,2)')).toBe(1.5);
    expect(await cell('-0.1')).toBe(-0.1);
    expect(await cell("'NaN'::DOUBLE")).toBe('NaN');
    expect(await cell("'inf'::DOUBLE")).toBe('Infinity');
    expect(await cell("'-inf'::DOUBLE")).toBe('-Infinity');
  });

  it('encodes TIMESTAMP and TIMESTAMP WITH TIME ZONE as epoch microseconds', async () => {
    expect(await cell("TIMESTAMP '1970-01-01 00:00:00'")).toBe(0);
    expect(await cell("TIMESTAMP '1969-12-31 23:59:59.999999'")).toBe(-1);
    expect(await cell("TIMESTAMP '2024-01-02 03:04:05.678901'")).toBe(1_704_164_645_678_901);
    expect(await cell("TIMESTAMPTZ '2024-06-01 12:00:00+05:30'")).toBe(1_717_223_400_000_000);
    // Beyond 2^53 microseconds (after the year 2255): a decimal string, as integers.
    expect(await cell("TIMESTAMP '9999-12-31 00:00:00'")).toBe('253402214400000000');
  });

  it('encodes times of day as their text form, with the offset of a TIME WITH TIME ZONE', async () => {
    for (const expr of [
      "TIME '12:34:56.789'",
      "TIME '00:00:00'",
      "TIME '23:59:59.999999'",
      "TIME '24:00:00'",
      "TIMETZ '12:34:56.789+02:30'",
      "TIMETZ '12:34:56-07'",
      "TIMETZ '00:00:00+15:59'",
      "TIMETZ '00:00:00-15:59'",
      "TIMETZ '24:00:00+00'",
      "'01:02:03.123456789'::TIME_NS",
    ]) {
      expect(await cell(expr), expr).toBe(await text(expr));
    }
    expect(await cell("TIME '12:34:56.789'")).toBe('12:34:56.789');
    expect(await cell("TIMETZ '12:34:56.789+02:30'")).toBe('12:34:56.789+02:30');
  });

  it('encodes infinite dates and timestamps as infinity and -infinity', async () => {
    for (const type of ['DATE', 'TIMESTAMP', 'TIMESTAMPTZ', 'TIMESTAMP_S', 'TIMESTAMP_MS', 'TIMESTAMP_NS']) {
      expect(await cell(`'infinity'::${type}`), type).toBe('infinity');
      expect(await cell(`'-infinity'::${type}`), type).toBe('-infinity');
    }
  });

  it("encodes every other scalar as DuckDB's text form", async () => {
    for (const expr of [
      "DATE '2024-02-29'",
      "DATE '-0044-03-15'",
      "TIMESTAMP_S '2024-01-02 03:04:05'",
      "TIMESTAMP_MS '2024-01-02 03:04:05.678'",
      "TIMESTAMP_NS '2024-01-02 03:04:05.678901234'",
      "INTERVAL '1 year 2 months 3 days 04:05:06.789'",
      "INTERVAL '-90 minutes'",
      "'123e4567-e89b-12d3-a456-426614174000'::UUID",
      "'\\x00ab'::BLOB",
      "'0101'::BIT",
      "'a'::ENUM('a', 'b')",
    ]) {
      expect(await cell(expr), expr).toBe(await text(expr));
    }
    expect(await cell("INTERVAL '-90 minutes'")).toBe('-01:30:00');
  });

  it("encodes nested values in the DuckDB client's display form (strings quoted)", async () => {
    expect(await cell('[1, 2, NULL]')).toBe('[1, 2, NULL]');
    expect(await cell("['a', 'b c']")).toBe("['a', 'b c']");
    expect(await cell("{'a': 1, 'b': 'x'}")).toBe("{'a': 1, 'b': 'x'}");
    expect(await cell("MAP {'k': 1}")).toBe("{'k': 1}");
    expect(await cell('[1, 2]::INTEGER[2]')).toBe('[1, 2]');
    expect(await cell('NULL::INTEGER[]')).toBe(null);
  });
});
