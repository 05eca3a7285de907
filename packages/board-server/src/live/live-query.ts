import type { Cell, QueryOutcome } from '@board/protocol';
import type { SseFrame } from '../watch/sse-frames.js';
import { liveFrame } from './live-frames.js';
import type { LiveStream } from './live-stream.js';
import { diffRows } from './result-diff.js';

/** The input of `query.live` (the same as `query.execute`'s, without the per-subscriber floor). */
export interface LiveInput {
  sql: string;
  tables: { token: string; entity: string }[];
  params: Cell[];
}

/**
 * Runs the query the way `query.execute` does (sync the replica, then read), for one evaluation,
 * at or past `head` (a head the store has reached).
 */
export type Evaluate = (board: string, input: LiveInput, head: number) => Promise<QueryOutcome>;

/**
 * One live query of a board: every subscriber of the same (board, sql, tables, params) shares it,
 * so each watermark is evaluated once for all of them, and each event is encoded once (one
 * `Buffer`) and written as it is to every stream that gets it.
 *
 * Coalescing rule: the query is evaluated at most once at a time. A head move announced while it
 * is evaluated is remembered, and when the evaluation ends one more runs, at the head read when it
 * starts; so a burst of writes during one evaluation costs one more evaluation, not one per write.
 * Every event is the exact result at its watermark; watermarks only go up; intermediate states of
 * a burst may be skipped.
 *
 *   idle ──request(head > watermark)──▶ evaluating ──outcome──▶ publish (diff to live streams,
 *     ▲                                    │  │                   whole result to waiting ones)
 *     └──── no head above the watermark ◀──┘  └──failure──▶ every stream: `error`, query dropped
 */
export class LiveQuery {
  readonly streams = new Set<LiveStream>();
  /** Watermark of the current result; -1 before the first evaluation. */
  watermark = -1;
  #columns: string[] = [];
  /** The current result's rows, each as its JSON text (whole-row identity for diffs). */
  #rows: string[] = [];
  #full: SseFrame | undefined;
  /** The highest head asked for. */
  #wanted = -1;
  #running = false;
  #failed = false;
  /** Evaluations run (each one DuckDB execution of the query). */
  evaluations = 0;

  constructor(
    readonly board: string,
    /** Its key among the board's live queries (sql, tables, params). */
    readonly key: string,
    readonly input: LiveInput,
    private readonly evaluate: Evaluate,
    /** Called when the query failed: its streams were ended. */
    private readonly onFailed: (query: LiveQuery, err: unknown) => void,
  ) {}

  /** True once an evaluation failed: the query takes no new streams. */
  get failed(): boolean {
    return this.#failed;
  }

  /** The board's head is (at least) `head`: evaluate when that is past the current result. */
  request(head: number): void {
    if (head > this.#wanted) this.#wanted = head;
    if (this.#wanted > this.watermark) void this.#run();
  }

  /** The current result as a `result` frame (encoded once per watermark). */
  fullFrame(): SseFrame {
    this.#full ??= liveFrame(
      'result',
      `{"watermark":${this.watermark},"columns":${JSON.stringify(this.#columns)},"rows":[${this.#rows.join(',')}]}`,
      this.watermark,
    );
    return this.#full;
  }

  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      while (!this.#failed && this.#wanted > this.watermark && this.streams.size > 0) {
        const target = this.#wanted;
        let outcome: QueryOutcome;
        try {
          this.evaluations++;
          outcome = await this.evaluate(this.board, this.input, target);
        } catch (err) {
          this.#failed = true;
          this.onFailed(this, err);
          return;
        }
        if (outcome.watermark > this.watermark) this.#publish(outcome);
        // Every head asked for was read before this evaluation's own head read: it cannot be
        // below. Should it be (a store reset), wait for the next announcement instead of spinning.
        if (outcome.watermark < target) break;
      }
    } finally {
      this.#running = false;
    }
  }

  #publish(outcome: QueryOutcome): void {
    const { columns, rows } = outcome.result;
    const texts = rows.map((r) => JSON.stringify(r));
    const from = this.watermark;
    let diff: SseFrame | undefined;
    if (from >= 0 && sameList(columns, this.#columns)) {
      const { removed, added } = diffRows(this.#rows, texts);
      const addedText = added.map((i) => `[${i},${texts[i]}]`).join(',');
      const json = `{"watermark":${outcome.watermark},"from":${from},"removed":[${removed.join(',')}],"added":[${addedText}]}`;
      // The whole result's data: `{"watermark":W,"columns":[...],"rows":[...]}`.
      let fullBytes = 40 + JSON.stringify(columns).length;
      for (const t of texts) fullBytes += t.length + 1;
      if (json.length < fullBytes) diff = liveFrame('diff', json, outcome.watermark);
    }
    this.watermark = outcome.watermark;
    this.#columns = columns;
    this.#rows = texts;
    this.#full = undefined;
    for (const s of [...this.streams]) s.offer(this, from, diff);
  }
}

const sameList = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i]);
