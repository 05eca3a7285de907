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
 * Heartbeat slots: streams are spread over this many slots, one slot's streams get `: hb` per tick,
 * and a tick comes every `heartbeatMs / HEARTBEAT_SLOTS`. Each stream still gets a heartbeat every
 * `heartbeatMs`, but 10,000 streams are 16 bursts of 625 writes instead of one of 10,000 (which
 * blocked the event loop for ~150 ms and held back any change fan-out behind it).
 */
const HEARTBEAT_SLOTS = 16;

/**
 * The node's watch streams: one {@link BoardFeed} per watched board (created with its first
 * stream, dropped with its last) and one heartbeat timer for all streams.
 */
export class WatchHub {
  readonly #feeds = new Map<string, BoardFeed>();
  #cutOff = 0;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #slots: Set<WatchStream>[] = Array.from({ length: HEARTBEAT_SLOTS }, () => new Set());
  #nextSlot = 0;
  #tick = 0;

  constructor(private readonly settings: WatchSettings) {
    const onSlowConsumer = settings.onSlowConsumer;
    this.settings = {
      ...settings,
      onSlowConsumer: () => {
        this.#cutOff++;
        onSlowConsumer?.();
      },
    };
    this.#heartbeat = setInterval(
      () => {
        const slot = this.#slots[this.#tick++ % HEARTBEAT_SLOTS];
        for (const s of slot ?? []) s.heartbeat();
      },
      Math.max(1, settings.heartbeatMs / HEARTBEAT_SLOTS),
    );
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
    const stream = new WatchStream(sink, feed, this.settings, expiresAt);
    const slot = this.#slots[this.#nextSlot++ % HEARTBEAT_SLOTS];
    slot?.add(stream);
    sink.onClose(() => slot?.delete(stream));
    await stream.run(after);
  }

  /** Ends every stream (node stopping) and the heartbeat. */
  closeAll(): void {
    clearInterval(this.#heartbeat);
    for (const feed of [...this.#feeds.values()]) for (const s of [...feed.streams]) s.close();
  }
}
