import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { WATCH } from '@board/protocol';
import {
  declareOptions,
  listenOptions,
  loadOptions,
  logLevelOption,
  millisecondsSchema,
  type OptionValues,
  onOffSchema,
  type RawOptions as RawOptionsOf,
  secondsSchema,
} from '@support/server';
import { z } from 'zod';

export { ConfigError } from '@support/server';

/**
 * Every option of `board-node`, declared once: environment variable, command-line flag, default
 * and description. This module is the only place that reads `process.env`.
 */
export const OPTIONS = declareOptions({
  ...listenOptions('BOARD', 8787),
  databaseUrl: {
    env: 'DATABASE_URL',
    flag: '--database-url <url>',
    schema: z.string().min(1).optional(),
    description: 'PostgreSQL connection string; without it the node runs a private embedded PostgreSQL',
  },
  dataDir: {
    env: 'BOARD_DATA_DIR',
    flag: '--data-dir <dir>',
    schema: z.string().default('.data/board'),
    description: 'directory for DuckDB replicas and the embedded PostgreSQL (one node per directory)',
  },
  nodeId: {
    env: 'BOARD_NODE_ID',
    flag: '--node-id <id>',
    schema: z.string().min(1).max(200).optional(),
    description: 'this node id, reported by /health and node.stats (default: hostname-pid-random)',
  },
  auth: {
    env: 'BOARD_AUTH',
    flag: '--auth <on|off>',
    schema: onOffSchema('on'),
    description: 'require capability tokens (on) or only the x-data-board header (off)',
  },
  tokenSecret: {
    env: 'BOARD_TOKEN_SECRET',
    flag: '--token-secret <secret>',
    schema: z.string().min(32, 'must be at least 32 characters').optional(),
    secret: true,
    description: 'HS256 secret for capability tokens (required when auth is on, and for token mint)',
  },
  retentionMaxChanges: {
    env: 'BOARD_RETENTION_MAX_CHANGES',
    flag: '--retention-max-changes <n>',
    schema: z.coerce.number().int().min(1).default(100_000),
    description: 'change records kept per board (tail-only trimming beyond this count)',
  },
  retentionMaxAgeSec: {
    env: 'BOARD_RETENTION_MAX_AGE_SEC',
    flag: '--retention-max-age-sec <s>',
    schema: secondsSchema(7 * 24 * 3600),
    description: 'change records older than this are trimmed (tail-only)',
  },
  retentionIntervalMs: {
    env: 'BOARD_RETENTION_INTERVAL_MS',
    flag: '--retention-interval-ms <ms>',
    schema: millisecondsSchema(60_000, { min: 10 }),
    description: 'how often the retention sweep runs',
  },
  idempotencyTtlSec: {
    env: 'BOARD_IDEMPOTENCY_TTL_SEC',
    flag: '--idempotency-ttl-sec <s>',
    schema: secondsSchema(7 * 24 * 3600),
    description: 'how long an idempotency key is remembered',
  },
  replicaMaxOpen: {
    env: 'BOARD_REPLICA_MAX_OPEN',
    flag: '--replica-max-open <n>',
    schema: z.coerce.number().int().min(1).default(16),
    description: 'replicas kept open at once; the least recently used is closed beyond this',
  },
  replicaMemoryMb: {
    env: 'BOARD_REPLICA_MEMORY_MB',
    flag: '--replica-memory-mb <mb>',
    schema: z.coerce.number().int().min(1).default(1024),
    description:
      'memory budget of all open replicas: least recently used ones are closed beyond it; each also gets max(64, budget/min(max-open, 4)) MB as its DuckDB memory_limit',
  },
  replicaThreads: {
    env: 'BOARD_REPLICA_THREADS',
    flag: '--replica-threads <n>',
    schema: z.coerce.number().int().min(1).max(256).default(1),
    description:
      'DuckDB threads of each replica: 1 runs each statement on the thread that issued it (statements on other connections and boards run beside it); more lets one large scan use more cores, at a CPU cost on every statement',
  },
  queryTimeoutMs: {
    env: 'BOARD_QUERY_TIMEOUT_MS',
    flag: '--query-timeout-ms <ms>',
    schema: millisecondsSchema(30_000),
    description:
      'deadline of a replica query, from checking the SQL to the encoded result; past it the query is interrupted (tag QueryTimeout)',
  },
  maxResultRows: {
    env: 'BOARD_MAX_RESULT_ROWS',
    flag: '--max-result-rows <n>',
    schema: z.coerce.number().int().min(1).default(100_000),
    description: 'rows a query may return; beyond it the query stops with ResultTooLarge',
  },
  maxResultBytes: {
    env: 'BOARD_MAX_RESULT_BYTES',
    flag: '--max-result-bytes <n>',
    schema: z.coerce
      .number()
      .int()
      .min(1024)
      .default(32 * 1024 * 1024),
    description: 'bytes of JSON rows a query may return; beyond it the query stops with ResultTooLarge',
  },
  pollMs: {
    env: 'BOARD_POLL_MS',
    flag: '--poll-ms <ms>',
    schema: millisecondsSchema(WATCH.pollMs, { min: 10, max: WATCH.pollMs }),
    description: 'watch poll interval for writes on other nodes (the spec bounds it at 500 ms)',
  },
  notify: {
    env: 'BOARD_NOTIFY',
    flag: '--notify <on|off>',
    schema: onOffSchema('on'),
    description: "LISTEN for other nodes' writes (off leaves only the poll; for diagnostics and tests)",
  },
  heartbeatMs: {
    env: 'BOARD_HEARTBEAT_MS',
    flag: '--heartbeat-ms <ms>',
    schema: millisecondsSchema(WATCH.heartbeatMs, { min: 10 }),
    description: 'watch heartbeat (`: hb`) interval',
  },
  watchBufferBytes: {
    env: 'BOARD_WATCH_BUFFER_BYTES',
    flag: '--watch-buffer-bytes <n>',
    schema: z.coerce
      .number()
      .int()
      .min(1)
      .default(1024 * 1024),
    description:
      'bytes a live watch stream may hold unsent; a change that finds more queued ends the stream with error SlowConsumer (the client resumes from its last seq)',
  },
  liveMaxStreams: {
    env: 'BOARD_LIVE_MAX_STREAMS',
    flag: '--live-max-streams <n>',
    schema: z.coerce.number().int().min(0).default(10_000),
    description: 'live query streams (POST /live) this node serves at once; beyond: error TooManyLiveQueries',
  },
  liveMaxPerToken: {
    env: 'BOARD_LIVE_MAX_PER_TOKEN',
    flag: '--live-max-per-token <n>',
    schema: z.coerce.number().int().min(0).default(100),
    description: 'live query streams one token may hold on this node at once (auth on)',
  },
  liveMaxQueries: {
    env: 'BOARD_LIVE_MAX_QUERIES',
    flag: '--live-max-queries <n>',
    schema: z.coerce.number().int().min(0).default(1000),
    description: 'distinct live queries (board, sql, tables, params) this node evaluates at once',
  },
  logLevel: logLevelOption('BOARD_LOG_LEVEL'),
});

/** Resolved configuration of a node. */
export type BoardNodeConfig = OptionValues<typeof OPTIONS> & { nodeId: string };
/** Raw option values as given (flags win over the environment). */
export type RawOptions = RawOptionsOf<typeof OPTIONS>;

/**
 * Resolves configuration from flags (`fromFlags`, already parsed by the CLI) over the
 * environment (`env`, default `process.env`) over defaults; throws one `ConfigError` naming every
 * problem.
 */
export function loadConfig(
  fromFlags: RawOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): BoardNodeConfig {
  const values = loadOptions(OPTIONS, { flags: fromFlags, env }, (v, problem, raw) => {
    if (v.auth === 'on' && raw.tokenSecret === undefined) {
      problem(['tokenSecret', 'auth'], 'a token secret is required when auth is on (or set BOARD_AUTH=off)');
    }
  });
  return {
    ...values,
    dataDir: resolve(values.dataDir),
    nodeId: values.nodeId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
  };
}
