/**
 * Type tests (checked by `tsc -p tsconfig.json`; vitest runs the runtime half): builder row types
 * over base plus user columns, Result narrowing, error tags. No server needed: only compile().
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type BoardClient,
  BoardError,
  type BoardErrorTag,
  type ClientQueryOutcome,
  connect,
  type LastRead,
  type LiveResult,
  type Result,
  type WatchEvent,
} from '../src/index.js';

interface Tasks {
  title: string | null;
  points: number | null;
}

const tasks = connect<Tasks>({ url: 'http://127.0.0.1:1' }).board('tasks');
const loose = connect({ url: 'http://127.0.0.1:1' }).board('anything');

describe('types', () => {
  it('types builder rows as base columns plus the schema parameter', () => {
    type All = Awaited<ReturnType<ReturnType<typeof tasks.selectAll>['execute']>>[number];
    expectTypeOf<All>().toEqualTypeOf<{
      id: string;
      updated_at: number | null;
      state: string | null;
      title: string | null;
      points: number | null;
    }>();
    const sel = tasks.select(['id', 'points']).where('points', '>', 3);
    expectTypeOf<Awaited<ReturnType<typeof sel.execute>>[number]>().toEqualTypeOf<{
      id: string;
      points: number | null;
    }>();
    // @ts-expect-error: not a column of the board
    tasks.select(['nope']);
    // @ts-expect-error: not a column of the board
    tasks.selectAll().where('nope', '=', 1);
    const joined = tasks.db
      .selectFrom('items as a')
      .innerJoin('items as b', 'b.id', 'a.state')
      .select(['a.id', 'b.title as partner']);
    expectTypeOf<Awaited<ReturnType<typeof joined.execute>>[number]>().toEqualTypeOf<{
      id: string;
      partner: string | null;
    }>();
    expect(joined.compile().sql).toBe(
      'select "a"."id", "b"."title" as "partner" from {{items}} as "a" inner join {{items}} as "b" on "b"."id" = "a"."state"',
    );
  });

  it('types live() rows by the builder selection or the type parameter', () => {
    const ctl = new AbortController();
    ctl.abort();
    const byBuilder = tasks.live(tasks.select(['id', 'points']).where('points', '>', 3), {
      signal: ctl.signal,
    });
    expectTypeOf(byBuilder).toEqualTypeOf<
      AsyncIterableIterator<LiveResult<{ id: string; points: number | null }>>
    >();
    const bySql = tasks.live<{ n: number }>('SELECT count(*) AS n FROM {{items}}', { signal: ctl.signal });
    type Item = typeof bySql extends AsyncIterableIterator<infer X> ? X : never;
    expectTypeOf<Item['rows']>().toEqualTypeOf<{ n: number }[]>();
    // @ts-expect-error: a builder carries its own parameters
    tasks.live(tasks.selectAll(), { params: [1] });
  });

  it('types a board<Row>() override and the loose default', () => {
    const typed = connect({ url: 'http://127.0.0.1:1' }).board<{ n: number | null }>('b');
    expectTypeOf(typed).toEqualTypeOf<BoardClient<{ n: number | null }>>();
    expectTypeOf(loose.select(['whatever'])).not.toBeNever();
  });

  it('types mutation inputs: id required, updated_at and unknown columns refused', () => {
    expectTypeOf(tasks.insert).parameter(0).toExtend<{ id: string }>();
    // @ts-expect-error: id is required
    void tasks.insert({ title: 'x' });
    // @ts-expect-error: wrong cell type for a typed column
    void tasks.insert({ id: 'a', points: 'many' });
    // @ts-expect-error: updated_at is set by the engine
    void tasks.update('a', { updated_at: 1 });
    expectTypeOf(tasks.update).returns.toEqualTypeOf<Promise<Result<number>>>();
  });

  it('types results as a discriminated union with switchable tags', () => {
    expectTypeOf(tasks.query).returns.toEqualTypeOf<Promise<Result<ClientQueryOutcome>>>();
    const r: Result<number> =
      Math.random() > 2 ? { ok: true, value: 1 } : { ok: false, error: new BoardError('Forbidden', 'no') };
    if (r.ok) expectTypeOf(r.value).toEqualTypeOf<number>();
    else {
      expect(r.error._tag).toBe('Forbidden');
      expectTypeOf(r.error).toEqualTypeOf<BoardError>();
      expectTypeOf(r.error._tag).toEqualTypeOf<BoardErrorTag>();
      expectTypeOf<'Forbidden'>().toExtend<BoardErrorTag>();
      expectTypeOf<'TransportTimeout'>().toExtend<BoardErrorTag>();
    }
    expectTypeOf<ClientQueryOutcome['servedBy']>().toEqualTypeOf<string>();
    expectTypeOf(tasks.lastRead()).toEqualTypeOf<LastRead>();
    expectTypeOf(tasks.watch()).toEqualTypeOf<AsyncIterableIterator<WatchEvent>>();
    expectTypeOf(tasks.atLeast(3)).toEqualTypeOf<BoardClient<Tasks>>();
  });
});
