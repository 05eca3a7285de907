import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { WATCH } from '@board/protocol';
import { z } from 'zod';

/**
 * Every option of `board-node`, declared once: environment variable, command-line flag, default
 * and description. This module is the only place that reads `process.env`.
 */
const OPTIONS = {
  port: {
    env: 'BOARD_PORT',
    flag: '--port <port>',
    schema: z.coerce.number().int().min(0).max(65535).default(8787),
    description: 'TCP port to listen on (0 picks a free one; the chosen port is logged)',
  },
  host: {
    env: 'BOARD_HOST',
    flag: '--host <host>',
    schema: z.string().default('127.0.0.1'),
    description: 'address to listen on',
  },
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
    schema: z.enum(['on', 'off']).default('on'),
    description: 'require capability tokens (on) or only the x-data-board header (off)',
  },
  tokenSecret: {
    env: 'BOARD_TOKEN_SECRET',
    flag: '--token-secret <secret>',
    schema: z.string().min(32, 'BOARD_TOKEN_SECRET must be at least 32 characters').optional(),
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
    schema: z.coerce
      .number()
      .int()
      .min(1)
      .default(7 * 24 * 3600),
    description: 'change records older than this are trimmed (tail-only)',
  },
  retentionIntervalMs: {
    env: 'BOARD_RETENTION_INTERVAL_MS',
    flag: '--retention-interval-ms <ms>',
    schema: z.coerce.number().int().min(10).default(60_000),
    description: 'how often the retention sweep runs',
  },
  idempotencyTtlSec: {
    env: 'BOARD_IDEMPOTENCY_TTL_SEC',
    flag: '--idempotency-ttl-sec <s>',
    schema: z.coerce
      .number()
      .int()
      .min(1)
      .default(7 * 24 * 3600),
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
      'memory budget of all open replicas: least recently used ones are closed beyond it; each also gets max(16, budget/max-open) MB as its DuckDB memory_limit',
  },
  queryTimeoutMs: {
    env: 'BOARD_QUERY_TIMEOUT_MS',
    flag: '--query-timeout-ms <ms>',
    schema: z.coerce.number().int().min(1).default(30_000),
    description: 'a replica query running longer is interrupted (tag QueryTimeout)',
  },
  pollMs: {
    env: 'BOARD_POLL_MS',
    flag: '--poll-ms <ms>',
    schema: z.coerce.number().int().min(10).max(WATCH.pollMs).default(WATCH.pollMs),
    description: 'watch poll interval for writes on other nodes (the spec bounds it at 500 ms)',
  },
  notify: {
    env: 'BOARD_NOTIFY',
    flag: '--notify <on|off>',
    schema: z.enum(['on', 'off']).default('on'),
    description: "LISTEN for other nodes' writes (off leaves only the poll; for diagnostics and tests)",
  },
  heartbeatMs: {
    env: 'BOARD_HEARTBEAT_MS',
    flag: '--heartbeat-ms <ms>',
    schema: z.coerce.number().int().min(10).default(WATCH.heartbeatMs),
    description: 'watch heartbeat (`: hb`) interval',
  },
  logLevel: {
    env: 'BOARD_LOG_LEVEL',
    flag: '--log-level <level>',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    description: 'pino log level',
  },
} as const;

type Options = typeof OPTIONS;
/** Resolved configuration of a node. */
export type BoardNodeConfig = { -readonly [K in keyof Options]: z.output<Options[K]['schema']> } & {
  nodeId: string;
};
/** Raw option values as given (flags win over the environment). */
export type RawOptions = Partial<Record<keyof Options, string | undefined>>;

/** Thrown when an option fails validation; the CLI entry point prints it. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** The declared options, for the CLI to build its flags and help from. */
export function optionDeclarations(): {
  key: keyof Options;
  env: string;
  flag: string;
  description: string;
}[] {
  return (Object.keys(OPTIONS) as (keyof Options)[]).map((key) => ({
    key,
    env: OPTIONS[key].env,
    flag: OPTIONS[key].flag,
    description: `${OPTIONS[key].description} [env ${OPTIONS[key].env}]`,
  }));
}

/**
 * Resolves configuration from flags (`fromFlags`, already parsed by the CLI) over the
 * environment (`env`, default `process.env`) over defaults.
 */
export function loadConfig(
  fromFlags: RawOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): BoardNodeConfig {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(OPTIONS) as (keyof Options)[]) {
    const decl = OPTIONS[key];
    const raw = fromFlags[key] ?? (env[decl.env] === '' ? undefined : env[decl.env]);
    const parsed = decl.schema.safeParse(raw);
    if (!parsed.success) {
      throw new ConfigError(`${decl.env} (${decl.flag.split(' ')[0]}): ${parsed.error.issues[0]?.message}`);
    }
    out[key] = parsed.data;
  }
  const config = out as BoardNodeConfig;
  config.dataDir = resolve(config.dataDir);
  config.nodeId ??= `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  if (config.auth === 'on' && config.tokenSecret === undefined) {
    throw new ConfigError('BOARD_TOKEN_SECRET is required when BOARD_AUTH=on (or set BOARD_AUTH=off)');
  }
  return config;
}
