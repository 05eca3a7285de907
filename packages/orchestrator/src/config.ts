import { parseArgs } from 'node:util';
import { z } from 'zod';

/**
 * Every setting of `orchd`, declared once: flag, environment variable, default and description.
 * This module is the only place in the program that reads `process.env` (it is passed in).
 */
interface OptionSpec {
  readonly key: keyof RawConfig;
  readonly flag?: string;
  readonly env: string;
  readonly default?: string;
  readonly secret?: boolean;
  readonly description: string;
}

interface RawConfig {
  port: string;
  listen: string;
  authToken: string;
  databaseUrl: string;
  requireAuth: string;
  secureCookies: string;
  tokenEncryptionKey: string;
  microvmAgentToken: string;
  dataDir: string;
  allowedCidrs: string;
  hostHealthIntervalS: string;
  reconcileIntervalS: string;
  agentTimeoutS: string;
  createTimeoutS: string;
  logLevel: string;
}

export const OPTIONS: readonly OptionSpec[] = [
  {
    key: 'port',
    flag: 'port',
    env: 'ORCH_PORT',
    default: '8080',
    description: 'TCP port of the HTTP API (0 picks a free one)',
  },
  {
    key: 'listen',
    flag: 'listen',
    env: 'ORCH_LISTEN',
    default: '127.0.0.1',
    description: 'address to listen on (0.0.0.0 for all)',
  },
  {
    key: 'authToken',
    flag: 'auth-token',
    env: 'ORCH_AUTH_TOKEN',
    default: '',
    secret: true,
    description: 'master token; empty: see README "Authentication"',
  },
  {
    key: 'databaseUrl',
    flag: 'database-url',
    env: 'DATABASE_URL',
    default: '',
    secret: true,
    description: 'PostgreSQL URL; empty: embedded PostgreSQL under the data dir (no API keys)',
  },
  {
    key: 'requireAuth',
    env: 'ORCH_REQUIRE_AUTH',
    default: 'false',
    description: 'true: refuse to start without a master token',
  },
  {
    key: 'secureCookies',
    env: 'ORCH_SECURE_COOKIES',
    default: 'false',
    description: 'true: mark the session cookie Secure even over plain HTTP (TLS proxy in front)',
  },
  {
    key: 'tokenEncryptionKey',
    env: 'TOKEN_ENCRYPTION_KEY',
    default: '',
    secret: true,
    description:
      '32-byte key (base64 or hex) encrypting agent tokens and per-VM secrets; required with DATABASE_URL',
  },
  {
    key: 'microvmAgentToken',
    env: 'MICROVM_AGENT_TOKEN',
    default: '',
    secret: true,
    description: 'default agent token for microvm hosts registered without one',
  },
  {
    key: 'dataDir',
    flag: 'data-dir',
    env: 'ORCH_DATA_DIR',
    default: '.data/orchd',
    description: 'directory of the embedded store and generated keys',
  },
  {
    key: 'allowedCidrs',
    env: 'ORCH_ALLOWED_CIDRS',
    default: '',
    description: 'comma-separated client CIDRs allowed to connect; empty: all',
  },
  {
    key: 'hostHealthIntervalS',
    env: 'ORCH_HOST_HEALTH_INTERVAL',
    default: '15',
    description: 'seconds between health checks of each host agent',
  },
  {
    key: 'reconcileIntervalS',
    env: 'ORCH_RECONCILE_INTERVAL',
    default: '5',
    description: 'seconds between reconciliations of environments with their agents',
  },
  {
    key: 'agentTimeoutS',
    env: 'ORCH_AGENT_TIMEOUT',
    default: '30',
    description: 'seconds an agent call may take before it counts as failed',
  },
  {
    key: 'createTimeoutS',
    env: 'ORCH_CREATE_TIMEOUT',
    default: '300',
    description: 'seconds a VM may take to start before its environment is error',
  },
  {
    key: 'logLevel',
    env: 'ORCH_LOG_LEVEL',
    default: 'info',
    description: 'log level: fatal, error, warn, info, debug, trace, silent',
  },
];

const bool = (name: string) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .transform((v, ctx) => {
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off', ''].includes(v)) return false;
      ctx.addIssue({ code: 'custom', message: `${name} must be true or false, got ${JSON.stringify(v)}` });
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

const Schema = z.object({
  port: z.coerce.number().int().min(0).max(65_535),
  listen: z.string().min(1),
  authToken: z.string(),
  databaseUrl: z
    .string()
    .refine(
      (v) => v === '' || /^postgres(ql)?:\/\//.test(v),
      'DATABASE_URL must be a postgres:// or postgresql:// URL',
    ),
  requireAuth: bool('ORCH_REQUIRE_AUTH'),
  secureCookies: bool('ORCH_SECURE_COOKIES'),
  tokenEncryptionKey: z.string().transform((v, ctx) => {
    if (v === '') return undefined;
    const key = decodeKey(v.trim());
    if (key) return key;
    ctx.addIssue({
      code: 'custom',
      message:
        'TOKEN_ENCRYPTION_KEY must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)',
    });
    return z.NEVER;
  }),
  microvmAgentToken: z.string(),
  dataDir: z.string().min(1),
  allowedCidrs: z.string().transform((v, ctx) => {
    const list = v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    for (const cidr of list) {
      if (!/^[0-9a-fA-F:.]+\/\d{1,3}$/.test(cidr)) {
        ctx.addIssue({
          code: 'custom',
          message: `ORCH_ALLOWED_CIDRS entry ${JSON.stringify(cidr)} is not a CIDR like 10.0.0.0/8`,
        });
      }
    }
    return list;
  }),
  hostHealthIntervalS: z.coerce.number().int().min(1).max(3600),
  reconcileIntervalS: z.coerce.number().int().min(1).max(3600),
  agentTimeoutS: z.coerce.number().int().min(1).max(3600),
  createTimeoutS: z.coerce
    .number()
    .int()
    .min(5)
    .max(24 * 3600),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});

export type Config = z.infer<typeof Schema>;

/** Raised for a configuration `orchd` refuses to start with; `problems` are one sentence each. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** The result of reading the command line: run with a config, or print help. */
export type Invocation = { readonly help: true } | { readonly help: false; readonly config: Config };

/** Reads flags (which win) and environment variables, validates everything, and reports all problems at once. */
export function loadConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Invocation {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(
          OPTIONS.filter((o) => o.flag).map((o) => [o.flag!, { type: 'string' as const }]),
        ),
      },
    }));
  } catch (err) {
    throw new ConfigError([`${(err as Error).message}; see orchd --help`]);
  }
  if (values.help) return { help: true };
  const raw = Object.fromEntries(
    OPTIONS.map((o) => {
      const fromFlag = o.flag ? values[o.flag] : undefined;
      return [o.key, typeof fromFlag === 'string' ? fromFlag : (env[o.env] ?? o.default ?? '')];
    }),
  );
  const parsed = Schema.safeParse(raw);
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((i) => {
        const option = OPTIONS.find((o) => o.key === i.path[0]);
        return i.code === 'custom' || !option ? i.message : `${option.env}: ${i.message}`;
      });
  problems.push(...crossChecks(raw as unknown as RawConfig));
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  return { help: false, config: parsed.data };
}

/** Rules that involve more than one setting, checked on the raw text so they are reported with the rest. */
function crossChecks(raw: RawConfig): string[] {
  const problems: string[] = [];
  if (/^\s*(true|1|yes|on)\s*$/i.test(raw.requireAuth) && raw.authToken === '') {
    problems.push('ORCH_REQUIRE_AUTH=true needs a master token: set ORCH_AUTH_TOKEN or --auth-token');
  }
  if (raw.databaseUrl !== '' && raw.tokenEncryptionKey === '') {
    problems.push(
      'TOKEN_ENCRYPTION_KEY is required with DATABASE_URL: every orchd sharing the database must encrypt agent tokens with the same key (generate one: openssl rand -base64 32)',
    );
  }
  return problems;
}

/** `orchd --help`: every option with its flag, variable and default, one line each. */
export function helpText(): string {
  const rows = OPTIONS.map((o) => [
    [o.flag ? `--${o.flag}` : '', o.env].filter(Boolean).join(', '),
    `${o.description}${o.default && !o.secret ? ` (default: ${o.default})` : ''}`,
  ]);
  const width = Math.max(...rows.map(([a]) => a!.length));
  return [
    'Usage: orchd [options]',
    '',
    'The orchestrator: HTTP API under /v1, /login and /logout. Flags win over environment variables.',
    '',
    ...rows.map(([a, b]) => `  ${a!.padEnd(width)}  ${b}`),
    `  ${'-h, --help'.padEnd(width)}  show this help`,
    '',
  ].join('\n');
}
