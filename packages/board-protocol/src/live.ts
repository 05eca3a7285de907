import type { Cell } from './cell.js';
import { queryExecuteInput, type Verb } from './procedures.js';

/**
 * `query.live`: a live SQL query, served as a server-sent event stream on `POST /live` (not under
 * `/rpc/`, whose answers are JSON envelopes). Its input is exactly `query.execute`'s (`sql` with
 * `{{token}}` placeholders, `tables`, `params`, optional `minWatermark`); it needs verb `read`.
 * A stream resumes with the standard SSE header `Last-Event-ID: <watermark>` (the `id` of the last
 * event the client received), so a router can move it to another node without parsing the body.
 *
 * @example
 * // POST /live  {"sql":"SELECT state, count(*) n FROM {{t}} GROUP BY state ORDER BY state","tables":[{"token":"t","entity":"items"}]}
 * // event: result   data: {"watermark":7,"columns":["state","n"],"rows":[["open",3]]}   id: 7
 * // event: diff     data: {"watermark":9,"from":7,"removed":[0],"added":[[0,["open",4]]]} id: 9
 */
export const LIVE_PROCEDURE = {
  name: 'query.live',
  path: '/live',
  input: queryExecuteInput,
  verb: 'read' satisfies Verb,
} as const;

/** The `Last-Event-ID` a live stream resumes from: a watermark (what each event's `id` carries). */
export const LAST_EVENT_ID_PATTERN = /^\d{1,15}$/;

/** `result`: the query's whole result at `watermark` (the first event, and whenever a diff is not smaller). */
export interface LiveResultEvent {
  watermark: number;
  columns: string[];
  rows: Cell[][];
}

/**
 * `diff`: the result at `watermark` as a change of the previous event's result (at `from`), by
 * whole row: `removed` are positions in the previous result (ascending), `added` are
 * `[position in the new result, row]` (ascending). The new result is the previous one without the
 * removed rows, with each added row inserted at its position; the columns are the previous ones.
 * A row whose cells changed is one removed and one added row. Both empty: the head moved but the
 * result is the same.
 */
export interface LiveDiffEvent {
  watermark: number;
  from: number;
  removed: number[];
  added: [number, Cell[]][];
}

/** `error`: the stream ends (tag and message as in the envelope). */
export interface LiveErrorEvent {
  _tag: string;
  message: string;
}

/** The events of a live stream, by SSE event name. */
export interface LiveEvents {
  result: LiveResultEvent;
  diff: LiveDiffEvent;
  error: LiveErrorEvent;
}

/**
 * Error tags after which a client resumes a live stream by itself (`Last-Event-ID`): the node cut
 * it off for reading too slowly, or a failure that a new attempt (maybe on another node) can get
 * past. Every other `error` event is final.
 */
export const LIVE_RESUMABLE_TAGS: readonly string[] = [
  'SlowConsumer',
  'Unavailable',
  'ReplicaUnavailable',
  'NoNodeAvailable',
  'NodeFailed',
  'RouterTimeout',
];

/**
 * The result a `diff` event describes, from the rows of the previous event's result (see
 * {@link LiveDiffEvent}). Throws when the diff does not fit the rows (it was computed from another
 * result): the caller then needs a whole result (resume).
 *
 * @example
 * applyLiveDiff([['a', 1], ['b', 2]], { watermark: 3, from: 2, removed: [1], added: [[0, ['c', 0]]] });
 * // [['c', 0], ['a', 1]]
 */
export function applyLiveDiff(
  rows: readonly Cell[][],
  diff: Pick<LiveDiffEvent, 'removed' | 'added'>,
): Cell[][] {
  const removed = new Set(diff.removed);
  for (const i of removed) {
    if (!Number.isInteger(i) || i < 0 || i >= rows.length)
      throw new RangeError(`diff removes row ${i} of ${rows.length}`);
  }
  const size = rows.length - removed.size + diff.added.length;
  const out: Cell[][] = new Array(size);
  let kept = 0;
  let a = 0;
  for (let pos = 0; pos < size; pos++) {
    const next = diff.added[a];
    if (next && next[0] === pos) {
      out[pos] = next[1];
      a++;
      continue;
    }
    while (removed.has(kept)) kept++;
    const row = rows[kept++];
    if (row === undefined) throw new RangeError('diff does not fit the previous result');
    out[pos] = row;
  }
  if (a !== diff.added.length) throw new RangeError('diff adds rows past the end of the result');
  return out;
}
