import type { ChangeRecord } from '@board/protocol';
import { type LongTimer, setLongTimeout } from '@support/server';
import { COMMITTED_AT, readBoardHead, readChangesPage } from '../changelog/changes-reader.js';
import { boardError, toWireError } from '../errors.js';
import type { BoardFeed } from './board-feed.js';
import type { WatchSink } from './response-sink.js';
import { HEARTBEAT_FRAME, type SseFrame, sseFrame } from './sse-frames.js';
import type { WatchSettings } from './watch-hub.js';

/** Records read per catch-up page. */
export const PAGE = 1000;

/** How long a stream that was ended (cut off, or failed) may take to be read before it is destroyed. */
export const END_GRACE_MS = 30_000;

type State = 'opening' | 'catching-up' | 'live' | 'closed';

/**
 * One `GET /watch` stream.
 *
 *   opening ──after omitted──▶ cursor = head (read now) ─────────────┐
 *   opening ──after given────▶ cursor = after ─▶ catching-up          │
 *                                                  │                  │
 *   catching-up: pages after cursor read from the store (at most 1000 records and about 4 MiB,
 *     `CHANGES_PAGE_BYTES`), encoded and written for this stream only; before each record, past the
 *     buffer limit it waits for the socket to drain (it holds back no one else)
 *     └─ still waiting, with no fewer bytes queued than at the previous heartbeat tick (the client
 *        read nothing for a whole heartbeat interval) ──▶ `error {_tag: 'SlowConsumer'}` ──▶ closed
 *     ├─ `change` each record, cursor = its seq
 *     ├─ cursor beyond retention ──▶ `resync {from}`, cursor = from
 *     └─ a page reached head, and cursor >= the board feed's cursor ◀─┘ ──▶ live
 *   live: the board's feed writes each new change, encoded once for all its streams (seq > cursor only)
 *     └─ a frame comes while more than `bufferBytes` are still queued (the client reads too slowly)
 *          ──▶ `error {_tag: 'SlowConsumer'}` after what is queued ──▶ closed
 *             (the client resumes with `after` = the last seq it received; nothing is lost)
 *   any ──token exp passed / client gone / node stopping──▶ closed
 *   any ──engine failure (unknown board, cursor ahead, store down)──▶ `error {_tag, message}` ──▶ closed
 *
 * Heartbeats (`: hb`) come from the hub's one timer for all streams.
 */
export class WatchStream {
  /** The seq of the last record written to this stream (or a resync's `from`). */
  cursor = 0;
  #state: State = 'opening';
  #expiry: LongTimer | undefined;
  readonly #openedAt: number;
  /**
   * While the catch-up waits for the socket to drain: the bytes queued at the last heartbeat tick
   * (-1 before the first); undefined when not waiting.
   */
  #queuedAtTick: number | undefined;

  constructor(
    private readonly sink: WatchSink,
    private readonly feed: BoardFeed,
    private readonly settings: WatchSettings,
    /** Token expiry (ms since the epoch); the stream ends when it passes. */
    expiresAt: number | undefined,
  ) {
    feed.streams.add(this);
    const now = settings.now ?? Date.now;
    this.#openedAt = now();
    // Token lifetimes are input: a 30-day token is a delay past what setTimeout can wait (2^31-1 ms),
    // which would end the stream at once; setLongTimeout waits it in full.
    if (expiresAt !== undefined) this.#expiry = setLongTimeout(() => this.close(), expiresAt - now(), now);
    sink.onClose(() => this.#closed());
  }

  get state(): State {
    return this.#state;
  }

  /** Catches up from `after` (default: the board's head now), then joins the board's feed. */
  async run(after: number | undefined): Promise<void> {
    if (this.#state === 'closed') return;
    const { db } = this.settings;
    const board = this.feed.board;
    try {
      let caughtUp = after === undefined;
      this.cursor = after ?? (await readBoardHead(db, board)).head;
      if (this.#state !== 'opening') return;
      this.#state = 'catching-up';
      while (this.#state === 'catching-up') {
        if (caughtUp && this.feed.join(this)) {
          this.#state = 'live';
          return;
        }
        const page = await readChangesPage(db, board, this.cursor, PAGE);
        if (this.#state !== 'catching-up') return;
        if (page.resync) {
          this.sink.write(sseFrame('resync', { from: page.from }));
          this.cursor = page.from;
          continue;
        }
        for (const rec of page.records as ChangeRecord[]) {
          // Checked before every record, as a live stream is: what is queued stays within the
          // buffer limit plus one record, whatever the page holds.
          if (!(await this.#roomToWrite())) return;
          this.sink.write(sseFrame('change', rec, rec.seq));
          this.cursor = rec.seq;
          const committed = (rec as { [COMMITTED_AT]?: number })[COMMITTED_AT];
          if (committed !== undefined && committed >= this.#openedAt) this.settings.onLag?.(committed, 1);
        }
        caughtUp = !page.more;
        if (!(await this.#roomToWrite())) return;
      }
    } catch (err) {
      this.fail(err);
    }
  }

  /**
   * Called by the feed for each frame while live: written when `seq` is news to this stream;
   * a stream that still holds more than the buffer limit unsent is cut off instead.
   */
  deliver(frame: SseFrame, seq: number): boolean {
    if (this.#state !== 'live' || seq <= this.cursor) return false;
    if (this.sink.buffered > this.settings.bufferBytes) {
      this.#cut();
      return false;
    }
    this.sink.write(frame);
    this.cursor = seq;
    return true;
  }

  /**
   * The hub's heartbeat: `: hb`, unless the stream is already full (a live one is then cut off; a
   * catching-up one when its catch-up waits for a drain and nothing was read since the previous
   * tick).
   */
  heartbeat(): void {
    if (this.#state === 'closed') return;
    if (this.#queuedAtTick !== undefined) {
      // A catch-up waiting for a drain: cut off when the client read nothing since the last tick.
      const queued = this.sink.buffered;
      if (this.#queuedAtTick >= 0 && queued >= this.#queuedAtTick) {
        this.#cut();
        return;
      }
      this.#queuedAtTick = queued;
    }
    if (this.sink.buffered > this.settings.bufferBytes) {
      if (this.#state === 'live') this.#cut();
      return;
    }
    this.sink.write(HEARTBEAT_FRAME);
  }

  /** Ends the stream without an event (token expired, node stopping). */
  close(): void {
    if (this.#state === 'closed') return;
    this.#closed();
    this.sink.end(END_GRACE_MS);
  }

  /** Ends the stream with `error {_tag, message}` (engine failure). */
  fail(err: unknown): void {
    if (this.#state === 'closed') return;
    const { tag, message } = toWireError(err, this.settings.log);
    this.#closed();
    this.sink.write(sseFrame('error', { _tag: tag, message }));
    this.sink.end(END_GRACE_MS);
  }

  /**
   * Waits, while more than the buffer limit is queued, for the socket to drain; false once the
   * stream is no longer catching up (cut off by the heartbeat, or closed).
   */
  async #roomToWrite(): Promise<boolean> {
    while (this.#state === 'catching-up' && this.sink.buffered > this.settings.bufferBytes) {
      this.#queuedAtTick = -1;
      try {
        await this.sink.drained();
      } finally {
        this.#queuedAtTick = undefined;
      }
    }
    return this.#state === 'catching-up';
  }

  #cut(): void {
    const err = boardError(
      'SlowConsumer',
      `the watch stream fell more than ${this.settings.bufferBytes} bytes behind and was closed; resume with after=${this.cursor}`,
    );
    this.settings.onSlowConsumer?.();
    this.fail(err);
  }

  #closed(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#expiry?.clear();
    this.feed.leave(this);
  }
}
