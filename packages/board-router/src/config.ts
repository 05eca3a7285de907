import {
  declareOptions,
  listenOptions,
  loadOptions,
  logLevelOption,
  millisecondsSchema,
  type OptionValues,
  onOffSchema,
  type RawOptions as RawOptionsOf,
} from '@support/server';
import { z } from 'zod';

export { ConfigError } from '@support/server';

/** Parses the node list: http URLs without path, query or credentials, no duplicates; every bad entry is an issue. */
const nodesSchema = z
  .string({ error: 'is required (comma-separated node URLs)' })
  .min(1, 'is required')
  .transform((raw, ctx) => {
    const out: string[] = [];
    for (const part of raw.split(',').map((p) => p.trim())) {
      const problem = (message: string) => ctx.addIssue({ code: 'custom', message });
      if (part === '') {
        problem('empty entry in the node list');
        continue;
      }
      let url: URL;
      try {
        url = new URL(part);
      } catch {
        problem(`"${part}" is not a URL`);
        continue;
      }
      if (url.protocol !== 'http:') problem(`"${part}" must be an http:// URL`);
      else if (
        (url.pathname !== '/' && url.pathname !== '') ||
        url.search ||
        url.hash ||
        url.username ||
        url.password
      ) {
        problem(`"${part}" must be a base URL (no path, query or credentials)`);
      } else if (url.port === '0') problem(`"${part}" must name a port other than 0`);
      else if (out.includes(url.origin)) problem(`"${part}" is listed twice`);
      else out.push(url.origin);
    }
    return out;
  });

/**
 * Every option of `board-router`, declared once: environment variable, command-line flag, default
 * and description. This module is the only place that reads `process.env`.
 */
export const OPTIONS = declareOptions({
  nodes: {
    env: 'BOARD_ROUTER_NODES',
    flag: '--nodes <urls>',
    schema: nodesSchema,
    description: 'comma-separated board-node base URLs, e.g. http://a:8787,http://b:8787 (required)',
  },
  ...listenOptions('BOARD_ROUTER', 8788),
  requestTimeoutMs: {
    env: 'BOARD_ROUTER_REQUEST_TIMEOUT_MS',
    flag: '--request-timeout-ms <ms>',
    schema: millisecondsSchema(10_000),
    description: "deadline of one routed request, every attempt included (the client's default deadline)",
  },
  balance: {
    env: 'BOARD_ROUTER_BALANCE',
    flag: '--balance <latency|round-robin>',
    schema: z.enum(['latency', 'round-robin']).default('latency'),
    description:
      'first-attempt choice: power of two choices over a moving average of node latency, or round robin',
  },
  hedge: {
    env: 'BOARD_ROUTER_HEDGE',
    flag: '--hedge <on|off>',
    schema: onOffSchema('on'),
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
    schema: millisecondsSchema(2, { min: 0 }),
    description: 'floor of the hedge delay',
  },
  hedgeMaxDelayMs: {
    env: 'BOARD_ROUTER_HEDGE_MAX_DELAY_MS',
    flag: '--hedge-max-delay-ms <ms>',
    schema: millisecondsSchema(1000, { min: 0 }),
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
    schema: millisecondsSchema(1000, { min: 10 }),
    description: 'interval of the active GET /health probe of every node',
  },
  healthTimeoutMs: {
    env: 'BOARD_ROUTER_HEALTH_TIMEOUT_MS',
    flag: '--health-timeout-ms <ms>',
    schema: millisecondsSchema(1000),
    description: 'a probe not answered within this marks the node down',
  },
  logLevel: logLevelOption('BOARD_ROUTER_LOG_LEVEL'),
});

/** Resolved configuration of a router; `nodes` is parsed into normalized base URLs. */
export type RouterConfig = OptionValues<typeof OPTIONS>;
/** Raw option values as given (flags win over the environment). */
export type RawOptions = RawOptionsOf<typeof OPTIONS>;

/**
 * Resolves configuration from flags (`fromFlags`, already parsed by the CLI) over the
 * environment (`env`, default `process.env`) over defaults; throws one `ConfigError` naming every
 * problem.
 */
export function loadConfig(fromFlags: RawOptions = {}, env: NodeJS.ProcessEnv = process.env): RouterConfig {
  return loadOptions(OPTIONS, { flags: fromFlags, env }, (v, problem) => {
    if (v.hedgeMinDelayMs !== undefined && v.hedgeMaxDelayMs !== undefined) {
      if (v.hedgeMinDelayMs > v.hedgeMaxDelayMs) {
        problem(
          ['hedgeMinDelayMs', 'hedgeMaxDelayMs'],
          'the minimum hedge delay must not exceed the maximum',
        );
      }
    }
  });
}
