import type { Server } from 'node:http';
import { fail } from '@board/protocol';
import { closeServer, createHttpServer, listen } from '@support/server';
import { ChangeNotifier } from './changelog/change-notifier.js';
import { RetentionService } from './changelog/retention.js';
import type { BoardNodeConfig } from './config.js';
import { LiveHub } from './live/live-hub.js';
import { createLogger, type Logger } from './log.js';
import { BoardNodeMetrics } from './metrics.js';
import { ReplicaCache } from './replica/replica-cache.js';
import { createRequestListener } from './rpc/app.js';
import type { NodeContext } from './rpc/handlers.js';
import { openStore, type Store } from './store/database.js';
import { BOARD_NODE_VERSION } from './version.js';
import { WatchHub } from './watch/watch-hub.js';

/** A running node. */
export interface BoardNode {
  /** Base URL, e.g. `http://127.0.0.1:8787`. */
  url: string;
  port: number;
  nodeId: string;
  store: Store;
  /** Stops accepting requests, ends watch streams, closes replicas and the store. Idempotent. */
  stop(): Promise<void>;
  /** Resolves when the node has stopped. */
  stopped: Promise<void>;
}

/**
 * Starts a board node: opens the store (migrations), starts the change notifier and the retention
 * sweep, and serves HTTP. The node is a service: `stop()` (or aborting `signal`) shuts it down.
 * @example
 * const node = await startBoardNode(loadConfig({ port: '0' }));
 * // ... node.url ...
 * await node.stop();
 */
export async function startBoardNode(
  config: BoardNodeConfig,
  options: { log?: Logger; signal?: AbortSignal } = {},
): Promise<BoardNode> {
  const log = options.log ?? createLogger(config.logLevel, { nodeId: config.nodeId });
  const store = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    log,
    ownEmbedded: true,
  });
  const life = new AbortController();
  const notifier = new ChangeNotifier(
    store.db,
    store.connectionString,
    config.pollMs,
    log,
    config.notify === 'on',
  );
  const replicas = new ReplicaCache(
    store.db,
    store.pool,
    config.dataDir,
    { maxOpen: config.replicaMaxOpen, memoryMb: config.replicaMemoryMb, threads: config.replicaThreads },
    {
      timeoutMs: config.queryTimeoutMs,
      maxRows: config.maxResultRows,
      maxBytes: config.maxResultBytes,
    },
    log,
  );
  const retention = new RetentionService(
    store.db,
    {
      maxChanges: config.retentionMaxChanges,
      maxAgeSec: config.retentionMaxAgeSec,
      idempotencyTtlSec: config.idempotencyTtlSec,
      intervalMs: config.retentionIntervalMs,
    },
    log,
  );
  const watch = new WatchHub({
    db: store.db,
    notifier,
    log,
    bufferBytes: config.watchBufferBytes,
    heartbeatMs: config.heartbeatMs,
    onLag: (committedMs, streams) => metrics.observeChangeLag(committedMs, streams),
  });
  const metrics = new BoardNodeMetrics(replicas, watch);
  const live = new LiveHub({
    replicas,
    pool: store.pool,
    notifier,
    log,
    limits: {
      maxStreams: config.liveMaxStreams,
      maxPerToken: config.liveMaxPerToken,
      maxQueries: config.liveMaxQueries,
    },
    bufferBytes: config.watchBufferBytes,
    heartbeatMs: config.heartbeatMs,
  });
  const ctx: NodeContext = {
    config,
    store,
    replicas,
    notifier,
    watch,
    live,
    log,
    startedAt: Date.now(),
    counters: { queries: 0, mutations: 0 },
    boardMeta: new Map(),
  };
  const services = [notifier.run(life.signal), retention.run(life.signal)];
  // Requests so malformed that Node's HTTP parser refuses them, or that no handler can serve
  // (no Host, `Host: a b`, `OPTIONS *`), are answered in the envelope too.
  const server: Server = createHttpServer(createRequestListener(ctx, metrics), {
    envelope: (message) => fail('InvalidInput', message),
  });
  let port: number;
  try {
    port = await listen(server, config.port, config.host);
  } catch (err) {
    life.abort();
    watch.closeAll();
    live.closeAll();
    await Promise.allSettled(services);
    await store.close();
    throw err;
  }
  log.info(
    { port, host: config.host, store: store.kind, auth: config.auth, version: BOARD_NODE_VERSION },
    'board-node listening',
  );

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => {
    resolveStopped = r;
  });
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      life.abort();
      watch.closeAll();
      live.closeAll();
      // Watch streams were ended just above; anything idle goes now, the rest within 2 s.
      await closeServer(server, 2000);
      await Promise.allSettled(services);
      replicas.closeAll();
      await store.close();
      log.info('board-node stopped');
      resolveStopped();
    })();
    return stopping;
  };
  options.signal?.addEventListener('abort', () => void stop(), { once: true });
  return { url: `http://${config.host}:${port}`, port, nodeId: config.nodeId, store, stop, stopped };
}
