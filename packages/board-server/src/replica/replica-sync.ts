import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { CacheOutcome, SyncResult } from '@board/protocol';
import type { Kysely } from 'kysely';
import type { Logger } from '../log.js';
import type { BoardDb } from '../store/database.js';
import { catchUpReplica } from './catch-up.js';
import { refineSyncError } from './duck-errors.js';
import type { BoardHead, HeadReader } from './head-reader.js';
import { noSync } from './outcome.js';
import { rebuildReplica } from './rebuild.js';
import { type DuckSettings, Replica, removeReplicaFiles } from './replica.js';

/** What bringing a replica to a head needs: the store, the replica files, and the cache's open replicas. */
export interface SyncContext {
  db: Kysely<BoardDb>;
  heads: HeadReader;
  /** Directory of the replica files. */
  dir: string;
  settings: DuckSettings;
  log: Logger;
  /** The board's open replica, if any. */
  openReplica(board: string): Replica | undefined;
  /**
   * Takes the board's open replica out of the cache and removes its files once its running reads
   * are done (see `ReplicaCache`).
   */
  evict(board: string): Promise<void>;
  /** Rebuilds that ran out of memory or hit a fatal error, by board ({@link RebuildFailure}). */
  failures: Map<string, RebuildFailure>;
}

/**
 * A rebuild that failed in DuckDB (`OutOfMemory`, `ReplicaUnavailable`) at a head. The same rows
 * fail the same way, so until the board changes, or {@link REBUILD_RETRY_MS} pass, requests get this
 * error at once instead of each reading the whole base table again (80 MB of text took 3 s per try).
 */
export interface RebuildFailure {
  boardNo: number;
  head: number;
  at: number;
  error: unknown;
}

/** How long a failed rebuild's error is answered before a request at the same head tries again. */
export const REBUILD_RETRY_MS = 60_000;

/** A replica brought to a head, and how. */
export interface Synced {
  replica: Replica;
  cache: CacheOutcome;
  sync: SyncResult;
}

/**
 * Brings the board's replica to `m`, the head read for this request; the caller holds the board's
 * lock. The open replica is used when it is of the board's current table number; else the file is
 * re-attached (`reattach`); then the change records up to the head are applied (`incremental`).
 * When there is no usable file, the log no longer reaches back past the replica's watermark, or the
 * replica is ahead of the store (a new database behind our back), the replica is discarded with its
 * files and rebuilt from the base table (`rebuild`).
 */
export async function syncReplica(ctx: SyncContext, board: string, m: BoardHead): Promise<Synced> {
  const path = join(ctx.dir, `${board}.${m.boardNo}.duckdb`);
  let replica = ctx.openReplica(board);
  let cache: CacheOutcome = 'hit';
  if (replica && replica.boardNo !== m.boardNo) {
    await ctx.evict(board);
    replica = undefined;
  }
  if (replica && replica.watermark > m.head) {
    // Another request synced past this request's head meanwhile, or the store was reset behind
    // our back (e.g. a new database): a fresh head tells which.
    const fresh = await ctx.heads.read(board);
    if (fresh && fresh.boardNo === m.boardNo && fresh.head >= replica.watermark) m = fresh;
  }
  if (!replica) {
    await mkdir(ctx.dir, { recursive: true });
    replica = await Replica.open(path, m.boardNo, ctx.settings);
    cache = 'reattach';
  }
  const from = replica?.watermark ?? 0;
  let sync: SyncResult = noSync(from);
  if (replica && replica.watermark < m.head) {
    const applied = await catchUpReplica(ctx.db, board, replica, m.head).catch((err) => {
      ctx.log.warn({ err, board }, 'incremental replica sync failed; rebuilding');
      return -1;
    });
    if (applied < 0) {
      await discard(ctx, board, replica);
      replica = undefined;
    } else {
      sync = { mode: 'incremental', from, to: replica.watermark, applied };
    }
  } else if (replica && replica.watermark > m.head) {
    // The store was reset behind our back (e.g. a new database): this replica is not ours.
    await discard(ctx, board, replica);
    replica = undefined;
  }
  if (!replica) {
    const failed = ctx.failures.get(board);
    if (failed?.boardNo === m.boardNo && failed.head === m.head && Date.now() - failed.at < REBUILD_RETRY_MS)
      throw failed.error;
    ctx.log.info({ board }, 'rebuilding replica from the base table');
    replica = await rebuildReplica(ctx.db, board, path, m.boardNo, ctx.settings).catch((err) => {
      const refined = refineSyncError(err, board, ctx.settings.memoryLimitMb);
      if (refined !== err) {
        ctx.log.warn({ err, board }, 'rebuilding the replica failed');
        ctx.failures.set(board, { boardNo: m.boardNo, head: m.head, at: Date.now(), error: refined });
      }
      throw refined;
    });
    ctx.failures.delete(board);
    cache = 'rebuild';
    sync = { mode: 'rebuild', from, to: replica.watermark, applied: 0 };
  }
  return { replica, cache, sync };
}

/** Discards a replica that is open (and maybe in use) or was just re-attached, with its files. */
async function discard(ctx: SyncContext, board: string, replica: Replica): Promise<void> {
  if (ctx.openReplica(board) === replica) await ctx.evict(board);
  else {
    replica.close();
    await removeReplicaFiles(replica.path);
  }
}
