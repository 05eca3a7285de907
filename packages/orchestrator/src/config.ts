import {
  declareOptions,
  listenOptions,
  loadOptions,
  logLevelOption,
  type OptionValues,
  type RawOptions as RawOptionsOf,
  secondsSchema,
} from '@support/server';
import { z } from 'zod';

export { ConfigError } from '@support/server';

/** `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`), false when unset. */
const bool = z
  .string()
  .trim()
  .toLowerCase()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || ['false', '0', 'no', 'off', ''].includes(v)) return false;
    if (['true', '1', 'yes', 'on'].includes(v)) return true;
    ctx.addIssue({ code: 'custom', message: `must be true or false, got ${JSON.stringify(v)}` });
    return z.NEVER;
  });

/** Decodes a 32-byte key written as base64 (44 characters) or hex (64 characters). */
function decodeKey(text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
    if (key.length === 32) return key;
  }
  return undefined;
}

/**
 * Every setting of `orchd`, declared once: environment variable, flag, default (in the schema) and
 * description. This module is the only place in the program that reads `process.env` (it is
 * passed in). Secrets other than the master token are read from the environment only.
 */
export const OPTIONS = declareOptions({
  ...listenOptions('ORCH', 8080, ['ORCH_LISTEN']),
  authToken: {
    env: 'ORCH_AUTH_TOKEN',
    flag: '--auth-token <token>',
    schema: z.string().default(''),
    secret: true,
    description: 'master token; empty: see README "Authentication"',
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    flag: '--database-url <url>',
    schema: z
      .string()
      .default('')
      .refine((v) => v === '' || /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL'),
    secret: true,
    description: 'PostgreSQL URL; empty: embedded PostgreSQL under the data dir (no API keys)',
  },
  requireAuth: {
    env: 'ORCH_REQUIRE_AUTH',
    flag: '--require-auth <bool>',
    schema: bool,
    description: 'true: refuse to start without a master token',
  },
  secureCookies: {
    env: 'ORCH_SECURE_COOKIES',
    flag: '--secure-cookies <bool>',
    schema: bool,
    description: 'true: mark the session cookie Secure even over plain HTTP (TLS proxy in front)',
  },
  tokenEncryptionKey: {
    env: 'TOKEN_ENCRYPTION_KEY',
    schema: z
      .string()
      .optional()
      .transform((v, ctx) => {
        if (v === undefined) return undefined;
        const key = decodeKey(v.trim());
        if (key) return key;
        ctx.addIssue({
          code: 'custom',
          message: 'must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)',
        });
        return z.NEVER;
      }),
    secret: true,
    description:
      '32-byte key (base64 or hex) encrypting agent tokens and per-VM secrets; required with DATABASE_URL',
  },
  microvmAgentToken: {
    env: 'MICROVM_AGENT_TOKEN',
    schema: z.string().default(''),
    secret: true,
    description: 'default agent token for microvm hosts registered without one',
  },
  dataDir: {
    env: 'ORCH_DATA_DIR',
    flag: '--data-dir <dir>',
    schema: z.string().min(1).default('.data/orchd'),
    description: 'directory of the embedded store and generated keys',
  },
  allowedCidrs: {
    env: 'ORCH_ALLOWED_CIDRS',
    flag: '--allowed-cidrs <list>',
    schema: z
      .string()
      .default('')
      .transform((v, ctx) => {
        const list = v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        for (const cidr of list) {
          if (!/^[0-9a-fA-F:.]+\/\d{1,3}$/.test(cidr)) {
            ctx.addIssue({
              code: 'custom',
              message: `entry ${JSON.stringify(cidr)} is not a CIDR like 10.0.0.0/8`,
            });
          }
        }
        return list;
      }),
    description: 'comma-separated client CIDRs allowed to connect; empty: all',
  },
  loginMaxFailures: {
    env: 'ORCH_LOGIN_MAX_FAILURES',
    flag: '--login-max-failures <n>',
    schema: z.coerce.number().int().min(0).max(1_000_000).default(10),
    description:
      'failed logins per client address per login window before it gets 429; 0: no per-address limit',
  },
  loginMaxFailuresAll: {
    env: 'ORCH_LOGIN_MAX_FAILURES_ALL',
    flag: '--login-max-failures-all <n>',
    schema: z.coerce.number().int().min(0).max(1_000_000).default(100),
    description:
      'failed logins from all addresses together per login window (token bucket); 0: no global limit',
  },
  loginWindowSec: {
    env: 'ORCH_LOGIN_WINDOW_SEC',
    flag: '--login-window-sec <s>',
    schema: secondsSchema(60, { max: 24 * 3600 }),
    description: 'seconds of the failed-login window (the per-address lockout and the global refill)',
  },
  hostHealthIntervalSec: {
    env: 'ORCH_HOST_HEALTH_INTERVAL_SEC',
    envAliases: ['ORCH_HOST_HEALTH_INTERVAL'],
    flag: '--host-health-interval-sec <s>',
    schema: secondsSchema(15, { max: 3600 }),
    description: 'seconds between health checks of each host agent',
  },
  reconcileIntervalSec: {
    env: 'ORCH_RECONCILE_INTERVAL_SEC',
    envAliases: ['ORCH_RECONCILE_INTERVAL'],
    flag: '--reconcile-interval-sec <s>',
    schema: secondsSchema(5, { max: 3600 }),
    description: 'seconds between reconciliations of environments with their agents',
  },
  eventsHeartbeatSec: {
    env: 'ORCH_EVENTS_HEARTBEAT_SEC',
    flag: '--events-heartbeat-sec <s>',
    schema: secondsSchema(15, { max: 3600 }),
    description: 'seconds between heartbeats on GET /v1/events',
  },
  streamRecheckSec: {
    env: 'ORCH_STREAM_RECHECK_SEC',
    flag: '--stream-recheck-sec <s>',
    schema: secondsSchema(5, { max: 3600 }),
    description:
      'seconds between re-checks of the sessions and API keys of open connections (console, events, log follow) against the store: one logged out or revoked on another orchd ends them within this',
  },
  layerRetentionDays: {
    env: 'ORCH_LAYER_RETENTION_DAYS',
    flag: '--layer-retention-days <days>',
    schema: z.coerce.number().int().min(1).max(3650).default(30),
    description: 'days a build layer is kept after it was last built or used (its retention_until)',
  },
  agentTimeoutSec: {
    env: 'ORCH_AGENT_TIMEOUT_SEC',
    envAliases: ['ORCH_AGENT_TIMEOUT'],
    flag: '--agent-timeout-sec <s>',
    schema: secondsSchema(30, { max: 3600 }),
    description: 'seconds an agent call may take before it counts as failed',
  },
  createTimeoutSec: {
    env: 'ORCH_CREATE_TIMEOUT_SEC',
    envAliases: ['ORCH_CREATE_TIMEOUT'],
    flag: '--create-timeout-sec <s>',
    schema: secondsSchema(300, { min: 5, max: 24 * 3600 }),
    description: 'seconds a VM may take to start before its environment is error',
  },
  dbPoolSize: {
    env: 'ORCH_DB_POOL_SIZE',
    flag: '--db-pool-size <n>',
    schema: z.coerce.number().int().min(2).max(1000).default(10),
    description:
      'PostgreSQL connections this orchd holds at most (creates waiting for placement hold none; see README "Placement")',
  },
  placementQueueMax: {
    env: 'ORCH_PLACEMENT_QUEUE_MAX',
    flag: '--placement-queue-max <n>',
    schema: z.coerce.number().int().min(1).max(1_000_000).default(1024),
    description:
      'creates that may wait for placement on this orchd; one more is 503 unavailable with retry_after_seconds',
  },
  placementBatchMax: {
    env: 'ORCH_PLACEMENT_BATCH_MAX',
    flag: '--placement-batch-max <n>',
    schema: z.coerce.number().int().min(1).max(10_000).default(128),
    description: 'waiting creates placed together in one store transaction',
  },
  idempotencyRetentionHours: {
    env: 'ORCH_IDEMPOTENCY_RETENTION_HOURS',
    flag: '--idempotency-hours <h>',
    schema: z.coerce
      .number()
      .int()
      .min(1)
      .max(24 * 365)
      .default(24),
    description:
      'hours an Idempotency-Key of a create is remembered (a retry with it within them gets the same environment)',
  },
  logLevel: logLevelOption('ORCH_LOG_LEVEL'),
});

/** The validated settings of `orchd`. */
export type Config = OptionValues<typeof OPTIONS>;
/** Raw option values from the command line (they win over the environment). */
export type RawOptions = RawOptionsOf<typeof OPTIONS>;

/**
 * Reads flags (which win) and environment variables, validates everything, and throws one
 * `ConfigError` naming every problem.
 */
export function loadConfig(fromFlags: RawOptions, env: Readonly<Record<string, string | undefined>>): Config {
  return loadOptions(OPTIONS, { flags: fromFlags, env }, (v, problem, raw) => {
    if (v.requireAuth === true && (raw.authToken ?? '') === '') {
      problem(['requireAuth', 'authToken'], 'true needs a master token: set ORCH_AUTH_TOKEN or --auth-token');
    }
    if ((raw.databaseUrl ?? '') !== '' && raw.tokenEncryptionKey === undefined) {
      problem(
        ['tokenEncryptionKey', 'databaseUrl'],
        'TOKEN_ENCRYPTION_KEY is required with DATABASE_URL: every orchd sharing the database must encrypt agent tokens with the same key (generate one: openssl rand -base64 32)',
      );
    }
  });
}
