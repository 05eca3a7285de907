/**
 * Every column type a board supports (the base columns and the five user column types), written
 * with edge values through `mutate.insert` (both write paths: the single statement and the
 * transaction) and `mutate.update`, then read back every way there is: `query.execute` on the
 * DuckDB replica caught up from the change log, `changes.read` and `/watch` (PostgreSQL's change
 * log), the base table in PostgreSQL itself, and `query.execute` on a replica rebuilt from that
 * table. All must agree, in the encoding the README documents ("Result values"): TEXT and BOOLEAN
 * as themselves, INTEGER and DOUBLE as numbers, TIMESTAMP as epoch microseconds. The same for
 * columns an operator adds later (`add-column`, which is an `ALTER TABLE` plus a `schema` record).
 * Time values a query computes (`TIME`, `TIMETZ`, `DATE`, infinities) read back in PostgreSQL's
 * text form, which is DuckDB's too.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Cell, ChangeRecord, ChangesPage, ColumnType, Row } from '@board/protocol';
import { boardAdmin, createLogger, openStore, type Store } from '@board/server';
import { describeStore, STORES } from '@support/pg/testing';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { boardTest, cli, events, type NodeProcess, nodeEnv, rpc, tag, value, watch } from './fixtures.js';

const T = [{ token: 't', entity: 'items' }];
type Outcome = {
  result: { columns: string[]; rows: Cell[][] };
  cache: string;
  sync: { mode: string };
};

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const MAX_DOUBLE = Number.MAX_VALUE;
const COLUMNS: [string, ColumnType][] = [
  ['t', 'TEXT'],
  ['n', 'INTEGER'],
  ['d', 'DOUBLE'],
  ['b', 'BOOLEAN'],
  ['ts', 'TIMESTAMP'],
];
/** Added by the operator once rows exist. */
const LATE: [string, ColumnType][] = COLUMNS.map(([name, type]) => [`late_${name}`, type]);

/**
 * Time values computed by a query, each read back as PostgreSQL's text form of the same literal
 * (DuckDB's text form agrees on all of these).
 */
const COMPUTED = [
  "TIME '12:34:56.789'",
  "TIME '00:00:00'",
  "TIME '23:59:59.999999'",
  "TIME '24:00:00'",
  "TIMETZ '12:34:56.789+02:30'",
  "TIMETZ '12:34:56-07'",
  "TIMETZ '00:00:00+15:59'",
  "TIMETZ '24:00:00+00'",
  "DATE '2024-02-29'",
  "DATE 'infinity'",
  "DATE '-infinity'",
  "TIMESTAMP 'infinity'",
  "TIMESTAMP '-infinity'",
];

for (const storeName of STORES) {
  describeStore(storeName)(`column values on the ${storeName} store`, () => {
    let node: NodeProcess;
    let env: Record<string, string>;
    let store: Store;
    let start: (env: Record<string, string>) => Promise<NodeProcess>;
    /** What the board holds: the cells written, by id (`updated_at` from the change records). */
    const model = new Map<string, Row>();
    let columns = COLUMNS;

    const q = (sqlText: string) =>
      rpc(node.url, 'query.execute', { sql: sqlText, tables: T }, { board: 'typed' });
    const mutate = async (procedure: string, body: unknown) =>
      value<{ watermark: number }>(await rpc(node.url, procedure, body, { board: 'typed' })).watermark;
    const names = () => ['id', 'updated_at', 'state', ...columns.map(([name]) => name)];
    const selectAll = () => `SELECT ${names().join(', ')} FROM {{t}} ORDER BY id`;
    const expected = () =>
      [...model.keys()].sort().map((id) => names().map((name) => model.get(id)?.[name] ?? null));
    const insert = async (rows: Row[], extra: Record<string, unknown> = {}) => {
      const watermark = await mutate('mutate.insert', { rows, ...extra });
      for (const row of rows) model.set(row.id as string, { ...row, updated_at: await updatedAt(watermark) });
    };
    const update = async (updates: { id: string; patch: Row }[]) => {
      const watermark = await mutate('mutate.update', { updates });
      for (const u of updates) {
        model.set(u.id, { ...model.get(u.id), ...u.patch, updated_at: await updatedAt(watermark) });
      }
    };
    const records = async (after = 0, limit = 1000): Promise<ChangeRecord[]> => {
      const page = value<ChangesPage>(
        await rpc(node.url, 'changes.read', { after, limit }, { board: 'typed' }),
      );
      if (page.resync) throw new Error('unexpected resync');
      return page.records;
    };
    /** The write time the change record at `seq` carries. */
    const updatedAt = async (seq: number) => {
      const [rec] = await records(seq - 1, 1);
      if (rec?.seq !== seq) throw new Error(`no change record ${seq}`);
      return (rec.payload as { updatedAt: number }).updatedAt;
    };
    /** The board's rows as the change log tells them (inserts, updates and deletes applied in order). */
    const fromChangeLog = (log: ChangeRecord[]) => {
      const rows = new Map<string, Row>();
      for (const rec of log) {
        const p = rec.payload as {
          updatedAt: number;
          rows?: Row[];
          updates?: { id: string; patch: Row }[];
          ids?: string[];
        };
        if (rec.kind === 'insert')
          for (const r of p.rows ?? []) rows.set(r.id as string, { ...r, updated_at: p.updatedAt });
        if (rec.kind === 'update') {
          for (const u of p.updates ?? [])
            rows.set(u.id, { ...rows.get(u.id), ...u.patch, updated_at: p.updatedAt });
        }
        if (rec.kind === 'delete') for (const id of p.ids ?? []) rows.delete(id);
      }
      return [...rows.keys()].sort().map((id) => names().map((name) => rows.get(id)?.[name] ?? null));
    };
    const baseTable = async () => {
      const r = await sql<{
        board_no: number;
      }>`SELECT board_no FROM board_boards WHERE board_id = 'typed'`.execute(store.db);
      return `board_${r.rows[0]?.board_no}`;
    };

    boardTest.beforeAll(async ({ openStore: openTestStore, tempDir, startNode, cleanups }) => {
      const dataDir = await tempDir('board-values-');
      env = nodeEnv(await openTestStore(storeName), dataDir);
      const spec = COLUMNS.flatMap(([name, type]) => ['--column', `${name}:${type}`]);
      expect((await cli(['board', 'create', 'typed', ...spec], env)).code).toBe(0);
      start = startNode;
      node = await start(env);
      store = await openStore({
        databaseUrl: env.DATABASE_URL,
        dataDir,
        log: createLogger('silent'),
        poolSize: 1,
      });
      cleanups.add(store, () => store.close());
    });

    it('reads back every edge value the same from the replica, the change log and PostgreSQL', async () => {
      // The replica exists before the writes, so that it catches up on them below.
      expect(value<Outcome>(await q(selectAll())).result.rows).toEqual([]);
      // First write of this node on the board: the transaction path.
      await insert([
        { id: 'r1-nulls', state: null, t: null, n: null, d: null, b: null, ts: null },
        { id: 'r2-low', state: '', t: '', n: -MAX_SAFE, d: -MAX_DOUBLE, b: false, ts: -MAX_SAFE },
      ]);
      // Unkeyed, on a board the node has written: the single statement.
      await insert([
        {
          id: 'r3-high',
          state: 'done',
          t: 'ünïcødé ✓ 𝄞 "quoted" \\ back\nslash\ttab',
          n: MAX_SAFE,
          d: MAX_DOUBLE,
          b: true,
          ts: MAX_SAFE,
        },
        { id: 'r4-small', t: '0', n: 0, d: 5e-324, b: true, ts: 0 },
      ]);
      // Keyed: the transaction path again. Columns left out are null.
      await insert(
        [
          { id: 'r5-fractions', t: 'null', n: -1, d: -0.1, ts: -1 },
          { id: 'r6-precise', t: ' 1e3 ', n: 2 ** 31, d: 1e20, ts: 1_704_164_645_678_901 },
          { id: 'r7-gone', t: 'deleted below', n: -(2 ** 31) - 1, d: 2 ** 53 + 2, ts: 86_400_000_000 },
        ],
        { idempotencyKey: 'values-1' },
      );
      await update([
        { id: 'r1-nulls', patch: { state: 'set', t: 'now set', n: 2 ** 40, d: 1e20, b: true, ts: -1 } },
        { id: 'r2-low', patch: { state: null, t: null, n: null, d: null, b: null, ts: null } },
        { id: 'r4-small', patch: { d: -5e-324, n: -(2 ** 53 - 1), ts: 1 } },
        { id: 'r5-fractions', patch: { d: 2 ** 31, b: false } },
        { id: 'r6-precise', patch: { d: 1.0000000000000002, ts: -86_400_000_001 } },
      ]);
      await mutate('mutate.delete', { ids: ['r7-gone'] });
      model.delete('r7-gone');

      // The replica, caught up from the change log (no rebuild on the way).
      const read = value<Outcome>(await q(selectAll()));
      expect(read.sync.mode).toBe('incremental');
      expect(read.result.columns).toEqual(names());
      expect(read.result.rows).toEqual(expected());

      // The change log, through changes.read and through /watch.
      const log = await records();
      expect(fromChangeLog(log)).toEqual(expected());
      const streamed = await watch(node.url, {
        board: 'typed',
        after: 0,
        until: (items) => events(items).length >= log.length,
      });
      expect(events(streamed.items).map((e) => e.data)).toEqual(log);

      // PostgreSQL's own base table: the same cells, and the same instants (as text, in UTC).
      const table = await baseTable();
      const stored = await sql<Record<string, string | boolean | null>>`
        SELECT id, state, t, n::text AS n, d::text AS d, b,
          (ts AT TIME ZONE 'UTC')::text AS ts,
          (ts AT TIME ZONE 'UTC')::time::text AS ts_time,
          (ts AT TIME ZONE 'UTC')::date::text AS ts_date
        FROM ${sql.table(table)}`.execute(store.db);
      const pgRows = stored.rows.sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1));
      const number = (text: unknown) => (text === null ? null : Number(text));
      expect(pgRows.map((r) => [r.id, r.state, r.t, number(r.n), number(r.d), r.b])).toEqual(
        [...model.keys()]
          .sort()
          .map((id) => ['id', 'state', 't', 'n', 'd', 'b'].map((c) => model.get(id)?.[c] ?? null)),
      );
      const times = value<Outcome>(
        await q('SELECT id, ts::VARCHAR, ts::TIME, ts::DATE FROM {{t}} ORDER BY id'),
      );
      expect(times.result.rows).toEqual(pgRows.map((r) => [r.id, r.ts, r.ts_time, r.ts_date]));
    });

    it('reads time values a query computes in their PostgreSQL text form', async () => {
      const duck = value<Outcome>(await q(`SELECT ${COMPUTED.join(', ')}`)).result.rows[0];
      const pg = await sql<Record<string, string>>`SELECT ${sql.join(
        COMPUTED.map((e, i) => sql`(${sql.raw(e)})::text AS ${sql.id(`c${i}`)}`),
      )}`.execute(store.db);
      expect(duck).toEqual(COMPUTED.map((_e, i) => pg.rows[0]?.[`c${i}`]));
      // TIMESTAMP values stay epoch microseconds, with or without a time zone.
      const instants = value<Outcome>(
        await q("SELECT TIMESTAMP '1969-12-31 23:59:59.999999', TIMESTAMPTZ '2024-06-01 12:00:00+05:30'"),
      );
      expect(instants.result.rows).toEqual([[-1, 1_717_223_400_000_000]]);
    });

    it('carries columns of every type an operator adds, to a caught-up and to a rebuilt replica', async () => {
      value<Outcome>(await q('SELECT 1 FROM {{t}}'));
      const admin = boardAdmin(store);
      for (const [name, type] of LATE) await admin.addColumn('typed', { name, type });
      columns = [...COLUMNS, ...LATE];
      for (const row of model.values()) for (const [name] of LATE) row[name] = null;
      await insert([
        {
          id: 'r8-late',
          state: 'late',
          t: 'x',
          n: 1,
          d: 0.5,
          b: true,
          ts: 2,
          late_t: 'ünï',
          late_n: -MAX_SAFE,
          late_d: 5e-324,
          late_b: false,
          late_ts: -MAX_SAFE,
        },
      ]);
      await update([
        { id: 'r3-high', patch: { late_t: '', late_n: MAX_SAFE, late_d: 1e20, late_b: true, late_ts: -1 } },
      ]);
      const read = value<Outcome>(await q(selectAll()));
      expect(read.sync.mode).toBe('incremental');
      expect(read.result.rows).toEqual(expected());
      expect(fromChangeLog(await records())).toEqual(expected());

      // A column added to the base table behind the node's back (a plain ALTER TABLE, no `schema`
      // record) is not part of the board: not writable, not replicated, not in a rebuilt replica.
      await sql`ALTER TABLE ${sql.table(await baseTable())} ADD COLUMN rogue time DEFAULT '24:00:00'`.execute(
        store.db,
      );
      expect(
        tag(await rpc(node.url, 'mutate.insert', { rows: [{ id: 'r9', rogue: 'x' }] }, { board: 'typed' })),
      ).toBe('UnknownColumn');

      // Without its file the replica is rebuilt from the base table: the same answer.
      await node.stop();
      await rm(join(env.BOARD_DATA_DIR as string, 'replicas'), { recursive: true, force: true });
      node = await start(env);
      const rebuilt = value<Outcome>(await q(selectAll()));
      expect(rebuilt.cache).toBe('rebuild');
      expect(rebuilt.result.rows).toEqual(expected());
      const star = value<Outcome>(await q('SELECT * FROM {{t}} LIMIT 0'));
      expect(star.result.columns).toEqual(names());
    });
  });
}
