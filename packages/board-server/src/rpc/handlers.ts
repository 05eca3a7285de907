import type { MutateAck, ProcedureInput, ProcedureName, ProcedureOutput } from '@board/protocol';
import type { RequestScope } from '../auth/authorize.js';
import { boardAdmin } from '../boards/board-admin.js';
import type { ChangeNotifier } from '../changelog/change-notifier.js';
import { readChangesPage } from '../changelog/changes-reader.js';
import { applyMutation, type BoardMetaCache, type Mutation } from '../changelog/mutations.js';
import type { BoardNodeConfig } from '../config.js';
import type { EncodedJson } from '../encoded-json.js';
import type { LiveHub } from '../live/live-hub.js';
import type { Logger } from '../log.js';
import type { ReplicaCache } from '../replica/replica-cache.js';
import type { Store } from '../store/database.js';
import type { WatchHub } from '../watch/watch-hub.js';

/** What handlers work with. */
export interface NodeContext {
  config: BoardNodeConfig;
  store: Store;
  replicas: ReplicaCache;
  notifier: ChangeNotifier;
  /** The node's watch streams and their per-board fan-out. */
  watch: WatchHub;
  /** The node's live queries (`POST /live`). */
  live: LiveHub;
  log: Logger;
  startedAt: number;
  counters: { queries: number; mutations: number };
  /** Board table numbers and columns this node has seen, for the one-statement insert. */
  boardMeta: BoardMetaCache;
}

/** A handler answers its procedure's output, as a value or already encoded. */
type Handler<P extends ProcedureName> = (
  ctx: NodeContext,
  scope: RequestScope,
  input: ProcedureInput<P>,
) => Promise<ProcedureOutput<P> | EncodedJson<ProcedureOutput<P>>>;

async function mutate(
  ctx: NodeContext,
  scope: RequestScope,
  mutation: Mutation,
  idempotencyKey: string | undefined,
): Promise<MutateAck> {
  const ack = await applyMutation(ctx.store.db, scope.board, mutation, {
    idempotencyKey,
    actor: scope.actor,
    cache: ctx.boardMeta,
    pool: ctx.store.pool,
  });
  ctx.counters.mutations++;
  // Push to this node's watchers at once; other nodes hear of it by NOTIFY or their poll.
  ctx.notifier.announce(scope.board, ack.watermark);
  return ack;
}

/** One handler per procedure of the contract. */
export const handlers: { [P in ProcedureName]: Handler<P> } = {
  'query.execute': async (ctx, scope, input) => {
    ctx.counters.queries++;
    return await ctx.replicas.execute(scope.board, input);
  },
  'mutate.insert': (ctx, scope, input) =>
    mutate(ctx, scope, { kind: 'insert', rows: input.rows }, input.idempotencyKey),
  'mutate.update': (ctx, scope, input) =>
    mutate(ctx, scope, { kind: 'update', updates: input.updates }, input.idempotencyKey),
  'mutate.delete': (ctx, scope, input) =>
    mutate(ctx, scope, { kind: 'delete', ids: input.ids }, input.idempotencyKey),
  'changes.read': async (ctx, scope, input) =>
    await readChangesPage(ctx.store.db, scope.board, input.after, input.limit),
  'node.stats': async (ctx) => {
    const boards = (await boardAdmin(ctx.store).list()).map((b) => b.id);
    return {
      nodeId: ctx.config.nodeId,
      boards,
      store: ctx.store.kind,
      uptimeMs: Date.now() - ctx.startedAt,
      queries: ctx.counters.queries,
      mutations: ctx.counters.mutations,
      watchers: ctx.watch.watcherCount,
      live: ctx.live.stats(),
      replicas: {
        ...ctx.replicas.stats(),
        ...ctx.replicas.counters,
        ...ctx.replicas.batching,
        keyIndexReads: ctx.replicas.paths.keyIndex,
        duckdbReads: ctx.replicas.paths.duckdb,
      },
    };
  },
};
