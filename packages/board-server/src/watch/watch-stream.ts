import type { ChangeRecord } from '@board/protocol';
import { setLongTimeout } from '@support/server';
import type { Kysely } from 'kysely';
import type { ChangeNotifier } from '../changelog/change-notifier.js';
import { readBoardHead, readChangesPage } from '../changelog/changes-reader.js';
import { toWireError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BoardDb } from '../store/database.js';

/** Where a watch stream writes: SSE events and comment lines. */
export interface WatchSink {
  event(name: 'change' | 'resync' | 'error', data: unknown, id?: string): Promise<void>;
  comment(text: string): Promise<void>;
}

/** What a watch stream needs. */
export interface WatchOptions {
  db: Kysely<BoardDb>;
  notifier: ChangeNotifier;
  board: string;
  /** `after` from the query string; undefined means "from the current head". */
  after: number | undefined;
  /** Token expiry (ms since epoch); the stream ends when it passes. */
  expiresAt: number | undefined;
  heartbeatMs: number;
  signal: AbortSignal;
  log: Logger;
  now?: () => number;
}

const PAGE = 1000;

/**
 * One `GET /watch` stream.
 *
 *   start ──after omitted──▶ cursor = head ──┐
 *   start ──after given────▶ cursor = after ─┤
 *                                            ▼
 *                      ┌──────────▶ catch-up: read pages after cursor
 *                      │              ├─ records ──▶ `change` each, cursor = last seq
 *                      │              └─ cursor beyond retention ──▶ `resync {from: head}`, cursor = head
 *                      │            ▼
 *                      └── wake ── idle (wakes: local write, NOTIFY, 500 ms poll; `: hb` every 15 s)
 *
 *   any ──token exp passed / client gone / node stopping──▶ closed
 *   any ──engine failure (unknown board, cursor ahead, store down)──▶ `error {_tag, message}` ──▶ closed
 */
export async function runWatch(sink: WatchSink, o: WatchOptions): Promise<void> {
  const now = o.now ?? Date.now;
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort();
  o.signal.addEventListener('abort', onOuterAbort, { once: true });
  let wake: (() => void) | undefined;
  let pending = true;
  const poke = () => {
    pending = true;
    wake?.();
  };
  stop.signal.addEventListener('abort', poke, { once: true });
  const unsubscribe = o.notifier.subscribe(o.board, poke);
  const heartbeat = setInterval(() => {
    sink.comment('hb').catch(() => stop.abort());
  }, o.heartbeatMs);
  // Token lifetimes are input: a 30-day token is a delay past what setTimeout can wait (2^31-1 ms),
  // which would end the stream at once; setLongTimeout waits it in full.
  const expiry =
    o.expiresAt === undefined ? undefined : setLongTimeout(() => stop.abort(), o.expiresAt - now(), now);
  try {
    let cursor = o.after ?? (await readBoardHead(o.db, o.board)).head;
    while (!stop.signal.aborted) {
      if (pending) {
        pending = false;
        cursor = await catchUp(sink, o, cursor, stop.signal);
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        if (pending || stop.signal.aborted) resolve();
      });
      wake = undefined;
    }
  } catch (err) {
    if (!stop.signal.aborted) {
      const { tag, message } = toWireError(err, o.log);
      await sink.event('error', { _tag: tag, message }).catch(() => undefined);
    }
  } finally {
    clearInterval(heartbeat);
    expiry?.clear();
    unsubscribe();
    o.signal.removeEventListener('abort', onOuterAbort);
  }
}

async function catchUp(sink: WatchSink, o: WatchOptions, from: number, signal: AbortSignal): Promise<number> {
  let cursor = from;
  for (;;) {
    if (signal.aborted) return cursor;
    const page = await readChangesPage(o.db, o.board, cursor, PAGE);
    if (page.resync) {
      await sink.event('resync', { from: page.from });
      cursor = page.from;
      continue;
    }
    for (const rec of page.records as ChangeRecord[]) {
      if (signal.aborted) return cursor;
      await sink.event('change', rec, String(rec.seq));
      cursor = rec.seq;
    }
    if (!page.more) return cursor;
  }
}
