import { type LongTimer, setLongTimeout } from '@support/server';
import { boardError, toWireError } from '../errors.js';
import type { Logger } from '../log.js';
import type { WatchSink } from '../watch/response-sink.js';
import { HEARTBEAT_FRAME, type SseFrame } from '../watch/sse-frames.js';
import { END_GRACE_MS } from '../watch/watch-stream.js';
import { liveFrame } from './live-frames.js';
import type { LiveQuery } from './live-query.js';

/** What a live stream needs from its hub. */
export interface LiveStreamSettings {
  log: Logger;
  /** Bytes a stream may hold unsent before it is cut off (`BOARD_WATCH_BUFFER_BYTES`). */
  bufferBytes: number;
  /** A stream was cut off for reading too slowly. */
  onSlowConsumer(): void;
  now?: () => number;
}

type State = 'waiting' | 'live' | 'closed';

/**
 * One `POST /live` stream, a subscriber of a shared {@link LiveQuery}.
 *
 *   waiting ──the query's result reaches `need`──▶ `result` (whole) ──▶ live
 *   live ──the query moved on from the watermark this stream holds──▶ `diff` (or `result` when
 *          the diff is not smaller), written without waiting on the socket
 *   live ──a frame (or heartbeat) finds more than `bufferBytes` unsent──▶
 *          `error {SlowConsumer}` (resume with Last-Event-ID = the last id received) ──▶ closed
 *   any ──query failed / limit / unknown board──▶ `error {_tag, message}` ──▶ closed
 *   any ──token exp passed──▶ `error {TokenExpired}` ──▶ closed
 *   any ──client gone / node stopping──▶ closed
 *
 * `need` is the watermark its first event must reach: the board's head read after the request
 * arrived, the input's `minWatermark`, and the `Last-Event-ID` it resumes from, whichever is highest.
 */
export class LiveStream {
  #state: State = 'waiting';
  /** Watermark of the last event written (the `id` the client resumes from). */
  #at: number | undefined;
  #expiry: LongTimer | undefined;
  #query: LiveQuery | undefined;
  readonly #onClosed: (() => void)[] = [];

  constructor(
    private readonly sink: WatchSink,
    private readonly settings: LiveStreamSettings,
    /** Token expiry (ms since the epoch); the stream ends with `TokenExpired` when it passes. */
    expiresAt: number | undefined,
    /** Watermark the first event must reach. */
    public need: number,
  ) {
    const now = settings.now ?? Date.now;
    if (expiresAt !== undefined) {
      this.#expiry = setLongTimeout(
        () => this.fail(boardError('TokenExpired', 'the token expired; the live query ended')),
        expiresAt - now(),
        now,
      );
    }
    sink.onClose(() => this.#close());
  }

  get state(): State {
    return this.#state;
  }

  /** Joins `query` (the stream is counted there until it closes). */
  attach(query: LiveQuery): void {
    this.#query = query;
    query.streams.add(this);
  }

  /** Calls `listener` once when the stream closes. */
  onClosed(listener: () => void): void {
    if (this.#state === 'closed') listener();
    else this.#onClosed.push(listener);
  }

  /**
   * The query has a result at its watermark, published after the one at `from`: a live stream at
   * `from` gets `diff` (when given), a waiting stream whose `need` it reaches the whole result.
   */
  offer(query: LiveQuery, from: number, diff: SseFrame | undefined): void {
    if (this.#state === 'closed') return;
    if (this.#state === 'live' && this.#at === from && diff) this.#write(diff, query.watermark);
    else if (query.watermark >= this.need && (this.#state === 'waiting' || this.#at !== query.watermark)) {
      this.#write(query.fullFrame(), query.watermark);
    }
  }

  /** The hub's heartbeat: `: hb`, or the cut-off when the stream is full. */
  heartbeat(): void {
    if (this.#state === 'closed') return;
    if (this.sink.buffered > this.settings.bufferBytes) this.#cut();
    else this.sink.write(HEARTBEAT_FRAME);
  }

  /** Ends the stream with `error {_tag, message}`. */
  fail(err: unknown): void {
    if (this.#state === 'closed') return;
    const { tag, message } = toWireError(err, this.settings.log);
    this.#close();
    this.sink.write(liveFrame('error', JSON.stringify({ _tag: tag, message })));
    this.sink.end(END_GRACE_MS);
  }

  /** Ends the stream without an event (node stopping: the client resumes elsewhere). */
  close(): void {
    if (this.#state === 'closed') return;
    this.#close();
    this.sink.end(END_GRACE_MS);
  }

  #write(frame: SseFrame, watermark: number): void {
    if (this.sink.buffered > this.settings.bufferBytes) {
      this.#cut();
      return;
    }
    this.sink.write(frame);
    this.#at = watermark;
    this.#state = 'live';
  }

  #cut(): void {
    this.settings.onSlowConsumer();
    const resume =
      this.#at === undefined ? 'resume without Last-Event-ID' : `resume with Last-Event-ID: ${this.#at}`;
    this.fail(
      boardError(
        'SlowConsumer',
        `the live stream fell more than ${this.settings.bufferBytes} bytes behind and was closed; ${resume}`,
      ),
    );
  }

  #close(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#expiry?.clear();
    this.#query?.streams.delete(this);
    for (const f of this.#onClosed.splice(0)) f();
  }
}
