import {
  applyLiveDiff,
  type Cell,
  HEADERS,
  LIVE_PROCEDURE,
  LIVE_RESUMABLE_TAGS,
  type LiveDiffEvent,
  type LiveResultEvent,
  type QueryResult,
  WATCH,
} from '@board/protocol';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { toObjects } from './dialect.js';
import { BoardError } from './errors.js';
import { baseHeaders, sleep, type TransportConfig } from './transport.js';
import { envelopeError, errorText, nextReconnectDelay } from './watch.js';

/** Options of {@link BoardClient.live}. */
export interface LiveOptions {
  /** Positional parameters bound as `$1`, `$2`, ... Default `[]`. */
  params?: Cell[];
  /** The first result is at or past this watermark. Default: the client's `atLeast` floor. */
  minWatermark?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/** One state of a live query's result, as {@link BoardClient.live} yields it. */
export interface LiveResult<R> {
  /** The board's watermark this result is exactly the query's answer at. */
  watermark: number;
  /** The result as `query.execute` returns it: columns, and rows as arrays of cells. */
  result: QueryResult;
  /** The rows as objects (column name to cell), typed. */
  rows: R[];
  /** Rows of this result that were not in the previous one yielded (whole-row comparison; all rows at first). */
  added: R[];
  /** Rows of the previous result yielded that are not in this one. */
  removed: R[];
  /** `x-data-served-by` of the stream (a router's), else undefined. */
  servedBy: string | undefined;
}

/** What one live stream sends: the query and where it may resume. */
interface LiveRequest {
  sql: string;
  tables: { token: string; entity: string }[];
  params: Cell[];
  minWatermark: number | undefined;
}

/**
 * A live query as an async iterator of results.
 *
 * ```
 *   connecting ──200──▶ streaming ──result──▶ yield (replaces the result; last = its watermark)
 *        ▲                  │ ──diff (from == last)──▶ yield the result it makes
 *        │                  │ ──diff that does not fit (from != last)──▶ reconnect (a whole result comes)
 *        │                  │ ──error, resumable (SlowConsumer, Unavailable, ReplicaUnavailable,
 *        │                  │     a router's NoNodeAvailable/NodeFailed/RouterTimeout)──▶ reconnect
 *        │                  │ ──error, any other──▶ throw BoardError
 *        │                  │ ──stream ended without an error (node stopping)──▶ reconnect
 *        │                  │ ──signal aborted──▶ done
 *        └── sleep(delay) ◀─┘ transport drop (reset, refused, 5xx without envelope, silent for
 *                              2 heartbeats + timeoutMs): reconnect with Last-Event-ID = last
 * ```
 *
 * A reconnect sends `Last-Event-ID: <last watermark yielded>`: the node's first event is the whole
 * result at a watermark at or past it, so no state after it is missed and the watermark never goes
 * back. The delays and the give-up rule are `watch()`'s ({@link nextReconnectDelay}).
 */
export async function* liveStream<R>(
  config: TransportConfig,
  board: string,
  request: LiveRequest,
  signal: AbortSignal | undefined,
): AsyncGenerator<LiveResult<R>, void, undefined> {
  let last: { watermark: number; result: QueryResult; keys: string[] } | undefined;
  let failures = 0;
  let droppedAt = 0;
  const reconnect = async (cause: unknown): Promise<void> => {
    if (failures === 0) droppedAt = performance.now();
    failures++;
    const delay = nextReconnectDelay(config, failures, performance.now() - droppedAt);
    if (delay === undefined) {
      if (cause instanceof BoardError) throw cause;
      throw new BoardError('TransportFailed', `live: ${errorText(cause)}`, { cause });
    }
    await sleep(delay, signal);
  };
  const body: Record<string, unknown> = { sql: request.sql, tables: request.tables, params: request.params };
  if (request.minWatermark !== undefined) body.minWatermark = request.minWatermark;
  const payload = JSON.stringify(body);
  while (!signal?.aborted) {
    const dog = new AbortController();
    let timer = setTimeout(() => dog.abort(), config.timeoutMs);
    const feed = () => {
      clearTimeout(timer);
      timer = setTimeout(() => dog.abort(), 2 * WATCH.heartbeatMs + config.timeoutMs);
    };
    const headers: Record<string, string> = {
      ...baseHeaders(config, board),
      'content-type': 'application/json',
      accept: 'text/event-stream',
    };
    if (last) headers['last-event-id'] = String(last.watermark);
    let res: Response;
    try {
      res = await config.fetch(`${config.url}${LIVE_PROCEDURE.path}`, {
        method: 'POST',
        headers,
        body: payload,
        signal: signal ? AbortSignal.any([signal, dog.signal]) : dog.signal,
      });
      feed();
    } catch (err) {
      clearTimeout(timer);
      if (signal?.aborted) return;
      await reconnect(err);
      continue;
    }
    if (res.status !== 200 || !res.body) {
      clearTimeout(timer);
      const err = envelopeError(res.status, await res.text().catch(() => ''), 'live');
      if ((err.isTransport || LIVE_RESUMABLE_TAGS.includes(err._tag)) && !signal?.aborted) {
        await reconnect(err);
        continue;
      }
      throw err;
    }
    const servedBy = res.headers.get(HEADERS.servedBy) ?? undefined;
    const pending: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (e) => pending.push(e) });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let resume: unknown;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          resume = new BoardError('TransportFailed', 'live: the stream ended without an error event');
          break;
        }
        feed();
        parser.feed(value);
        let next: LiveResult<R> | undefined;
        for (const e of pending.splice(0)) {
          if (e.event === 'error') {
            const data = JSON.parse(e.data) as { _tag?: string; message?: string };
            const err = new BoardError((data._tag ?? 'Internal') as BoardError['_tag'], data.message ?? '');
            if (!LIVE_RESUMABLE_TAGS.includes(err._tag)) {
              if (next) yield next;
              throw err;
            }
            resume = err;
            break;
          }
          const step =
            e.event === 'result' || e.event === 'diff' ? advance<R>(last, e.event, e.data) : undefined;
          if (step === 'misfit') {
            resume = new BoardError('BadResponse', 'live: a diff that does not follow the result held');
            break;
          }
          if (!step) continue;
          last = step.state;
          failures = 0;
          // The same state again (a resume that found nothing new): the node's copy becomes the
          // base of its next diffs, and nothing is yielded.
          if (step.yielded) next = { ...step.yielded, servedBy };
        }
        // Events of one network read are folded: the latest state is what the consumer needs.
        if (next) yield next;
        if (resume) break;
      }
    } catch (err) {
      if (err instanceof BoardError && !err.isTransport) throw err;
      if (signal?.aborted) return;
      resume = err;
    } finally {
      clearTimeout(timer);
      reader.cancel().catch(() => undefined);
    }
    if (signal?.aborted) return;
    await reconnect(resume);
  }
}

type Held = { watermark: number; result: QueryResult; keys: string[] };

/**
 * The state after one `result` or `diff` event, and what to yield; undefined for an event that
 * is not news (at or below the watermark held), `misfit` for a diff not made from the result held.
 */
function advance<R>(
  held: Held | undefined,
  event: 'result' | 'diff',
  data: string,
): { state: Held; yielded: Omit<LiveResult<R>, 'servedBy'> | undefined } | 'misfit' | undefined {
  let result: QueryResult;
  let keys: string[];
  let added: Cell[][];
  let removed: Cell[][];
  let watermark: number;
  if (event === 'result') {
    const ev = JSON.parse(data) as LiveResultEvent;
    if (held && ev.watermark < held.watermark) return undefined;
    watermark = ev.watermark;
    result = { columns: ev.columns, rows: ev.rows };
    keys = ev.rows.map((r) => JSON.stringify(r));
    if (held && ev.watermark === held.watermark)
      return { state: { watermark, result, keys }, yielded: undefined };
    ({ added, removed } = multisetChange(held, ev.rows, keys));
  } else {
    const ev = JSON.parse(data) as LiveDiffEvent;
    if (!held || ev.from !== held.watermark) return 'misfit';
    let rows: Cell[][];
    try {
      rows = applyLiveDiff(held.result.rows, ev);
    } catch {
      return 'misfit';
    }
    watermark = ev.watermark;
    result = { columns: held.result.columns, rows };
    added = ev.added.map(([, row]) => row);
    removed = ev.removed.map((i) => held.result.rows[i]!);
    const removedSet = new Set(ev.removed);
    const keptKeys = held.keys.filter((_k, i) => !removedSet.has(i));
    keys = new Array<string>(rows.length);
    let k = 0;
    let a = 0;
    for (let pos = 0; pos < rows.length; pos++) {
      const next = ev.added[a];
      if (next && next[0] === pos) {
        keys[pos] = JSON.stringify(next[1]);
        a++;
      } else keys[pos] = keptKeys[k++]!;
    }
  }
  const columns = result.columns;
  return {
    state: { watermark, result, keys },
    yielded: {
      watermark,
      result,
      rows: toObjects(columns, result.rows) as R[],
      added: toObjects(columns, added) as R[],
      removed: toObjects(columns, removed) as R[],
    },
  };
}

/** Rows added and removed between the result held and a whole new one (multisets of whole rows). */
function multisetChange(
  held: Held | undefined,
  rows: Cell[][],
  keys: string[],
): { added: Cell[][]; removed: Cell[][] } {
  if (!held) return { added: rows, removed: [] };
  const count = new Map<string, number>();
  for (const k of held.keys) count.set(k, (count.get(k) ?? 0) + 1);
  const added: Cell[][] = [];
  keys.forEach((k, i) => {
    const n = count.get(k) ?? 0;
    if (n > 0) count.set(k, n - 1);
    else added.push(rows[i]!);
  });
  const removed: Cell[][] = [];
  held.keys.forEach((k, i) => {
    const n = count.get(k) ?? 0;
    if (n > 0) {
      count.set(k, n - 1);
      removed.push(held.result.rows[i]!);
    }
  });
  return { added, removed };
}
