import type { Kysely } from 'kysely';
import type { ChangeNotifier } from '../changelog/change-notifier.js';
import type { Logger } from '../log.js';
import type { BoardDb } from '../store/database.js';
import { BoardFeed } from './board-feed.js';
import type { WatchSink } from './response-sink.js';
import { WatchStream } from './watch-stream.js';

/** What the watch streams of a node share. */
export interface WatchSettings {
  db: Kysely<BoardDb>;
  notifier: ChangeNotifier;
  log: Logger;
  /** Bytes a live stream may hold unsent before it is cut off (`BOARD_WATCH_BUFFER_BYTES`). */
  bufferBytes: number;
  /** `: hb` interval. */
  heartbeatMs: number;
  /** A change written at `committedMs` (ms since the epoch) reached `streams` streams now. */
  onLag?: (committedMs: number, streams: number) => void;
  /** A live stream was cut off for being too slow. */
  onSlowConsumer?: () => void;
  now?: () => number;
}

/**
 * The node's watch streams: one {@link BoardFeed} per watched board (created with its first
 * stream, dropped with its last) and one heartbeat timer for all streams.
 */
export class WatchHub {
  readonly #feeds = new Map<string, BoardFeed>();
  #cutOff = 0;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(private readonly settings: WatchSettings) {
    const onSlowConsumer = settings.onSlowConsumer;
    this.settings = {
      ...settings,
      onSlowConsumer: () => {
        this.#cutOff++;
        onSlowConsumer?.();
      },
    };
    this.#heartbeat = setInterval(() => {
      for (const feed of this.#feeds.values()) for (const s of feed.streams) s.heartbeat();
    }, settings.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Open watch streams on this node. */
  get watcherCount(): number {
    let n = 0;
    for (const feed of this.#feeds.values()) n += feed.streams.size;
    return n;
  }

  /** Streams cut off for being too slow since start. */
  get slowConsumers(): number {
    return this.#cutOff;
  }

  /**
   * Opens a stream of `board` on `sink` from `after` (default: the board's head); resolves once it
   * is live or closed (a live stream is then driven by its board's feed).
   */
  async open(
    sink: WatchSink,
    board: string,
    after: number | undefined,
    expiresAt: number | undefined,
  ): Promise<void> {
    let feed = this.#feeds.get(board);
    if (!feed) {
      const created = new BoardFeed(board, this.settings, () => {
        if (this.#feeds.get(board) === created) this.#feeds.delete(board);
      });
      this.#feeds.set(board, created);
      feed = created;
    }
    await new WatchStream(sink, feed, this.settings, expiresAt).run(after);
  }

  /** Ends every stream (node stopping) and the heartbeat. */
  closeAll(): void {
    clearInterval(this.#heartbeat);
    for (const feed of [...this.#feeds.values()]) for (const s of [...feed.streams]) s.close();
  }
}
