import { z } from 'zod';

/**
 * Every option of `board-router`, declared once: environment variable, command-line flag, default
 * and description. This module is the only place that reads `process.env`.
 */
const OPTIONS = {
  nodes: {
    env: 'BOARD_ROUTER_NODES',
    flag: '--nodes <urls>',
    schema: z.string({ error: 'is required (comma-separated node URLs)' }).min(1, 'is required'),
    description: 'comma-separated board-node base URLs, e.g. http://a:8787,http://b:8787 (required)',
  },
  port: {
    env: 'BOARD_ROUTER_PORT',
    flag: '--port <port>',
    schema: z.coerce.number().int().min(0).max(65535).default(8788),
    description: 'TCP port to listen on (0 picks a free one; the chosen port is printed)',
  },
  host: {
    env: 'BOARD_ROUTER_HOST',
    flag: '--host <host>',
    schema: z.string().min(1).default('127.0.0.1'),
    description: 'address to listen on',
  },
  requestTimeoutMs: {
    env: 'BOARD_ROUTER_REQUEST_TIMEOUT_MS',
    flag: '--request-timeout-ms <ms>',
    schema: z.coerce.number().int().min(1).default(10_000),
    description: "deadline of one routed request, every attempt included (the client's default deadline)",
  },
  hedge: {
    env: 'BOARD_ROUTER_HEDGE',
    flag: '--hedge <on|off>',
    schema: z.enum(['on', 'off']).default('on'),
    description: 'send backup requests for retryable requests that are slower than the hedge delay',
  },
  hedgePercentile: {
    env: 'BOARD_ROUTER_HEDGE_PERCENTILE',
    flag: '--hedge-percentile <p>',
    schema: z.coerce.number().gt(0).lt(100).default(95),
    description: 'the hedge delay is this percentile of recent successful attempt latencies',
  },
  hedgeWindow: {
    env: 'BOARD_ROUTER_HEDGE_WINDOW',
    flag: '--hedge-window <n>',
    schema: z.coerce.number().int().min(10).max(100_000).default(1000),
    description: 'sliding window of latencies the percentile is taken over (last n attempts)',
  },
  hedgeMinDelayMs: {
    env: 'BOARD_ROUTER_HEDGE_MIN_DELAY_MS',
    flag: '--hedge-min-delay-ms <ms>',
    schema: z.coerce.number().min(0).default(2),
    description: 'floor of the hedge delay',
  },
  hedgeMaxDelayMs: {
    env: 'BOARD_ROUTER_HEDGE_MAX_DELAY_MS',
    flag: '--hedge-max-delay-ms <ms>',
    schema: z.coerce.number().min(0).default(1000),
    description: 'ceiling of the hedge delay',
  },
  hedgeBudget: {
    env: 'BOARD_ROUTER_HEDGE_BUDGET',
    flag: '--hedge-budget <ratio>',
    schema: z.coerce.number().min(0).max(1).default(0.1),
    description: 'hedges allowed per retryable request (0.1: at most 10% extra load, plus the burst)',
  },
  hedgeBurst: {
    env: 'BOARD_ROUTER_HEDGE_BURST',
    flag: '--hedge-burst <n>',
    schema: z.coerce.number().min(0).default(10),
    description: 'hedge budget the router starts with and may save up to',
  },
  healthIntervalMs: {
    env: 'BOARD_ROUTER_HEALTH_INTERVAL_MS',
    flag: '--health-interval-ms <ms>',
    schema: z.coerce.number().int().min(10).default(1000),
    description: 'interval of the active GET /health probe of every node',
  },
  healthTimeoutMs: {
    env: 'BOARD_ROUTER_HEALTH_TIMEOUT_MS',
    flag: '--health-timeout-ms <ms>',
    schema: z.coerce.number().int().min(1).default(1000),
    description: 'a probe not answered within this marks the node down',
  },
  logLevel: {
    env: 'BOARD_ROUTER_LOG_LEVEL',
    flag: '--log-level <level>',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    description: 'pino log level',
  },
} as const;

type Options = typeof OPTIONS;
/** Resolved configuration of a router; `nodes` is parsed into normalized base URLs. */
export type RouterConfig = Omit<
  { -readonly [K in keyof Options]: z.output<Options[K]['schema']> },
  'nodes'
> & {
  nodes: string[];
};
/** Raw option values as given (flags win over the environment). */
export type RawOptions = Partial<Record<keyof Options, string | undefined>>;

/** Thrown when an option fails validation; the CLI entry point prints it. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** The declared options, for the CLI to build its flags and help from. */
export function optionDeclarations(): { key: keyof Options; flag: string; description: string }[] {
  return (Object.keys(OPTIONS) as (keyof Options)[]).map((key) => ({
    key,
    flag: OPTIONS[key].flag,
    description: `${OPTIONS[key].description} [env ${OPTIONS[key].env}]`,
  }));
}

/** Parses the node list: http(s) URLs without path, query or credentials, no duplicates. */
function parseNodes(raw: string): string[] {
  const out: string[] = [];
  for (const part of raw.split(',').map((p) => p.trim())) {
    if (part === '') throw new ConfigError('BOARD_ROUTER_NODES (--nodes): empty entry in the node list');
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      throw new ConfigError(`BOARD_ROUTER_NODES (--nodes): "${part}" is not a URL`);
    }
    if (url.protocol !== 'http:') {
      throw new ConfigError(`BOARD_ROUTER_NODES (--nodes): "${part}" must be an http:// URL`);
    }
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || url.username) {
      throw new ConfigError(
        `BOARD_ROUTER_NODES (--nodes): "${part}" must be a base URL (no path, query or credentials)`,
      );
    }
    const base = url.origin;
    if (out.includes(base)) throw new ConfigError(`BOARD_ROUTER_NODES (--nodes): "${part}" is listed twice`);
    out.push(base);
  }
  return out;
}

/**
 * Resolves configuration from flags (`fromFlags`, already parsed by the CLI) over the
 * environment (`env`, default `process.env`) over defaults.
 */
export function loadConfig(fromFlags: RawOptions = {}, env: NodeJS.ProcessEnv = process.env): RouterConfig {
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
  out.nodes = parseNodes(out.nodes as string);
  const config = out as RouterConfig;
  if (config.hedgeMinDelayMs > config.hedgeMaxDelayMs) {
    throw new ConfigError('--hedge-min-delay-ms must not exceed --hedge-max-delay-ms');
  }
  return config;
}
