import type { ChangeRecord } from '@board/protocol';
import { COMMITTED_AT, readChangesPage } from '../changelog/changes-reader.js';
import { type SseFrame, sseFrame } from './sse-frames.js';
import type { WatchSettings } from './watch-hub.js';
import { PAGE, type WatchStream } from './watch-stream.js';

/**
 * The fan-out of one board on this node: every change is read from the store once and encoded
 * once (one `Buffer` per SSE frame), then written to each live stream of the board without
 * waiting on any of them. A stream that cannot keep up is cut off by its own buffer limit (see
 * `WatchStream.deliver`), so a slow client never delays the others.
 *
 * Invariant: a live stream has received every record up to its own `cursor`, and joins only when
 * its cursor is at or above the feed's; the feed then writes every record above its cursor,
 * each to the streams whose cursor is below it. So no stream misses or repeats a record, whichever
 * of stream and feed read further first.
 */
export class BoardFeed {
  /** Streams of this board, catching up or live. */
  readonly streams = new Set<WatchStream>();
  readonly #live = new Set<WatchStream>();
  /** Seq of the last record fanned out; undefined while no stream is live. */
  #cursor: number | undefined;
  #pending = false;
  #pumping = false;
  #unsubscribe: (() => void) | undefined;

  constructor(
    readonly board: string,
    private readonly settings: WatchSettings,
    /** Called when the last stream left. */
    private readonly onEmpty: () => void,
  ) {
    // Subscribed before any stream of the board reads the store, so no head move between a
    // stream's read and its joining goes unannounced.
    this.#unsubscribe = settings.notifier.subscribe(board, () => this.poke());
  }

  /** Live streams. */
  get liveCount(): number {
    return this.#live.size;
  }

  /** The board's head moved (local write, NOTIFY or poll): read and fan out what is new. */
  poke(): void {
    this.#pending = true;
    void this.#pump();
  }

  /**
   * A stream that caught up asks to go live; true when it did. Refused (false) when the feed has
   * already fanned out records past the stream's cursor: the stream reads them itself first.
   */
  join(stream: WatchStream): boolean {
    if (this.#cursor !== undefined && stream.cursor < this.#cursor) return false;
    if (this.#cursor === undefined) this.#cursor = stream.cursor;
    this.#live.add(stream);
    if (this.#pending) void this.#pump();
    return true;
  }

  /** The stream closed. */
  leave(stream: WatchStream): void {
    this.#live.delete(stream);
    if (this.#live.size === 0) this.#cursor = undefined;
    if (this.streams.delete(stream) && this.streams.size === 0) {
      this.#unsubscribe?.();
      this.#unsubscribe = undefined;
      this.onEmpty();
    }
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#pending && this.#cursor !== undefined && this.#live.size > 0) {
        this.#pending = false;
        let more = true;
        while (more && this.#cursor !== undefined && this.#live.size > 0) {
          const page = await readChangesPage(this.settings.db, this.board, this.#cursor, PAGE);
          if (page.resync) {
            this.#fanOut(sseFrame('resync', { from: page.from }), page.from);
            if (this.#live.size > 0) this.#cursor = page.from;
            continue;
          }
          for (const rec of page.records as ChangeRecord[]) {
            const n = this.#fanOut(sseFrame('change', rec, rec.seq), rec.seq);
            const committed = (rec as { [COMMITTED_AT]?: number })[COMMITTED_AT];
            if (n > 0 && committed !== undefined) this.settings.onLag?.(committed, n);
          }
          if (this.#live.size > 0) this.#cursor = page.cursor;
          more = page.more;
        }
      }
    } catch (err) {
      // As a failed catch-up read: every live stream gets `error` and closes (clients resume).
      for (const s of [...this.#live]) s.fail(err);
    } finally {
      this.#pumping = false;
    }
  }

  /** Writes `frame` to every live stream that has not seen `seq`; returns how many got it. */
  #fanOut(frame: SseFrame, seq: number): number {
    let n = 0;
    for (const s of this.#live) if (s.deliver(frame, seq)) n++;
    return n;
  }
}
