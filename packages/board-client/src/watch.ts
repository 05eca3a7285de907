import { type ChangeRecord, WATCH, type WatchEvent } from '@board/protocol';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { BoardError } from './errors.js';
import { baseHeaders, sleep, type TransportConfig } from './transport.js';

/** Options of {@link BoardClient.watch}. */
export interface WatchOptions {
  /** Start after this watermark. Default: the node's current head (only new changes). */
  after?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/**
 * The watch stream as an async iterator.
 *
 * ```
 *   connecting ──200──▶ streaming ──change──▶ yield { resync:false, records } (last = seq)
 *        ▲                  │ ──resync {from}──▶ yield { resync:true, from } (last = from)
 *        │                  │ ──error {_tag}──▶ throw BoardError (SlowConsumer included)
 *        │                  │ ──server ended the stream──▶ done
 *        │                  │ ──signal aborted──▶ done
 *        └── sleep(delayMs) ◀┘ transport drop (connection reset, refused, a 5xx without an envelope,
 *                               a router's NoNodeAvailable/NodeFailed/RouterTimeout, or silent: no
 *                               headers within timeoutMs, no byte within 2 heartbeats + timeoutMs):
 *                               reconnect with after=last;
 *                               (give up ──▶ throw BoardError: see `reconnectDelay`)
 * ```
 *
 * Resume: `last` is the seq of the last record handed to the consumer (or a resync's `from`), so
 * the reconnect asks for exactly the records after it: none lost, none repeated. Without `after`
 * and before the first event, the first reconnect uses the head the stream started at, learned
 * from `node` as the watermark to resume from (see `startAt`).
 *
 * `SlowConsumer`: a node cuts off a stream that holds more than its buffer limit unsent (this
 * consumer iterates more slowly than changes arrive). The error event comes after every record the
 * stream was sent, and is thrown like any server `error` event (the spec's rule); the consumer
 * resumes with `watch({ after: <the last seq it saw> })` and loses nothing.
 */
export async function* watchStream(
  config: TransportConfig,
  board: string,
  options: WatchOptions,
  startAt: () => Promise<number | undefined>,
): AsyncGenerator<WatchEvent, void, undefined> {
  const signal = options.signal;
  let last = options.after;
  let failures = 0;
  let droppedAt = 0;
  /** Delay before the next reconnect, or undefined to give up. */
  const reconnectDelay = (): number | undefined => {
    if (failures === 0) droppedAt = performance.now();
    failures++;
    return nextReconnectDelay(config, failures, performance.now() - droppedAt);
  };
  while (!signal?.aborted) {
    if (last === undefined) {
      // Pin the start so that a reconnect before the first change loses nothing.
      last = await startAt();
    }
    const query = last === undefined ? '' : `?after=${last}`;
    // Watchdog: the headers must arrive within timeoutMs, then some bytes (at least the `: hb`
    // heartbeat) within two heartbeat intervals; otherwise the connection counts as dropped.
    const dog = new AbortController();
    let timer = setTimeout(() => dog.abort(), config.timeoutMs);
    const feed = () => {
      clearTimeout(timer);
      timer = setTimeout(() => dog.abort(), 2 * WATCH.heartbeatMs + config.timeoutMs);
    };
    const connSignal = signal ? AbortSignal.any([signal, dog.signal]) : dog.signal;
    let res: Response;
    try {
      res = await config.fetch(`${config.url}/watch${query}`, {
        headers: { ...baseHeaders(config, board), accept: 'text/event-stream' },
        signal: connSignal,
      });
      feed();
    } catch (err) {
      clearTimeout(timer);
      if (signal?.aborted) return;
      const delay = reconnectDelay();
      if (delay === undefined)
        throw new BoardError('TransportFailed', `watch: ${errorText(err)}`, { cause: err });
      await sleep(delay, signal);
      continue;
    }
    if (res.status !== 200 || !res.body) {
      clearTimeout(timer);
      const text = await res.text().catch(() => '');
      const err = envelopeError(res.status, text);
      // A 5xx without an envelope (a proxy in front) is a transport failure, as for requests:
      // reconnected under the same policy as a dropped connection. So is a router's answer that
      // no node could take the stream right now: through a router, the counterpart of a refused
      // connection to a node that is restarting. Any other envelope is final.
      if ((err.isTransport || ROUTER_NO_NODE.has(err._tag)) && !signal?.aborted) {
        const delay = reconnectDelay();
        if (delay !== undefined) {
          await sleep(delay, signal);
          continue;
        }
      }
      throw err;
    }
    const pending: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (e) => pending.push(e) });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return; // the server closed the stream (token expired, node stopping)
        feed();
        parser.feed(value);
        failures = 0;
        let records: ChangeRecord[] = [];
        for (const e of pending.splice(0)) {
          if (e.event === 'change') {
            const rec = JSON.parse(e.data) as ChangeRecord;
            if (last !== undefined && rec.seq <= last) continue; // never repeat
            records.push(rec);
          } else if (e.event === 'resync') {
            if (records.length > 0) {
              last = records[records.length - 1]!.seq;
              yield { resync: false, records };
              records = [];
            }
            const from = (JSON.parse(e.data) as { from: number }).from;
            last = from;
            yield { resync: true, from };
          } else if (e.event === 'error') {
            if (records.length > 0) {
              last = records[records.length - 1]!.seq;
              yield { resync: false, records };
              records = [];
            }
            const body = JSON.parse(e.data) as { _tag?: string; message?: string };
            throw new BoardError((body._tag ?? 'Internal') as BoardError['_tag'], body.message ?? '');
          }
        }
        if (records.length > 0) {
          last = records[records.length - 1]!.seq;
          yield { resync: false, records };
        }
      }
    } catch (err) {
      if (err instanceof BoardError) throw err;
      if (signal?.aborted) return;
      const delay = reconnectDelay();
      if (delay === undefined)
        throw new BoardError('TransportFailed', `watch: ${errorText(err)}`, { cause: err });
      await sleep(delay, signal);
    } finally {
      clearTimeout(timer);
      reader.cancel().catch(() => undefined);
    }
  }
}

/** A board-router's tags for "no node could answer", which a watch rides out like a dropped connection. */
const ROUTER_NO_NODE: ReadonlySet<string> = new Set(['NoNodeAvailable', 'NodeFailed', 'RouterTimeout']);

/**
 * Reconnect policy after the `failures`-th consecutive failed connection, `elapsedMs` after the
 * drop: none when `retry.times` is 0; otherwise keep trying while fewer than `retry.times`
 * attempts failed or the drop is younger than `timeoutMs` (so a node restart within the deadline
 * is ridden out with the defaults), waiting `retry.delayMs` doubled per failure, at most 1 s.
 */
export function nextReconnectDelay(
  config: Pick<TransportConfig, 'retry' | 'timeoutMs'>,
  failures: number,
  elapsedMs: number,
): number | undefined {
  const { times, delayMs } = config.retry;
  if (times <= 0) return undefined;
  if (failures > times && elapsedMs >= config.timeoutMs) return undefined;
  return Math.min(delayMs * 2 ** Math.min(failures - 1, 20), Math.max(delayMs, 1000));
}

/** The message of a thrown value (shared by watch and live). */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A non-200 answer of a stream route (`watch`, `live`) as a typed error: its envelope, else by status. */
export function envelopeError(status: number, text: string, what = 'watch'): BoardError {
  try {
    const body = JSON.parse(text) as { error?: { _tag?: string; message?: string } };
    if (body.error?._tag) {
      return new BoardError(body.error._tag as BoardError['_tag'], body.error.message ?? '', { status });
    }
  } catch {
    // not an envelope
  }
  if (status >= 500) return new BoardError('TransportFailed', `${what}: HTTP ${status}`, { status });
  return new BoardError('BadResponse', `${what}: HTTP ${status}: ${text.slice(0, 200)}`, { status });
}
