import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';
import { HedgeBudget, LatencyWindow } from './latency.js';
import { isRetryable } from './route.js';

describe('loadConfig', () => {
  it('reads flags over env over defaults and normalizes node URLs', () => {
    const c = loadConfig(
      { port: '9000' },
      { BOARD_ROUTER_NODES: 'http://a:8787/, http://b:8787', BOARD_ROUTER_PORT: '1' },
    );
    expect(c.nodes).toEqual(['http://a:8787', 'http://b:8787']);
    expect(c.port).toBe(9000);
    expect(c.hedge).toBe('on');
    expect(c.hedgeBudget).toBe(0.1);
    expect(c.hedgePercentile).toBe(95);
  });
  it.each([
    [{}, /BOARD_ROUTER_NODES.*required/],
    [{ BOARD_ROUTER_NODES: 'http://a:1,,http://b:2' }, /empty entry/],
    [{ BOARD_ROUTER_NODES: 'not a url' }, /not a URL/],
    [{ BOARD_ROUTER_NODES: 'https://a:1' }, /http:\/\//],
    [{ BOARD_ROUTER_NODES: 'http://a:1/rpc' }, /base URL/],
    [{ BOARD_ROUTER_NODES: 'http://a:1,http://a:1/' }, /twice/],
    [{ BOARD_ROUTER_NODES: 'http://127.0.0.1:0' }, /must name a port other than 0/],
    [{ BOARD_ROUTER_NODES: 'http://u@a:1' }, /no path, query or credentials/],
    [{ BOARD_ROUTER_NODES: 'http://u:pw@a:1' }, /no path, query or credentials/],
    [{ BOARD_ROUTER_NODES: 'http://:pw@127.0.0.1:1' }, /no path, query or credentials/],
    [{ BOARD_ROUTER_NODES: 'http://a:1', BOARD_ROUTER_HEDGE_BUDGET: '1.5' }, /HEDGE_BUDGET/],
    [{ BOARD_ROUTER_NODES: 'http://a:1', BOARD_ROUTER_HEDGE: 'maybe' }, /BOARD_ROUTER_HEDGE /],
    [{ BOARD_ROUTER_NODES: 'http://a:1', BOARD_ROUTER_PORT: 'x' }, /PORT/],
    [
      {
        BOARD_ROUTER_NODES: 'http://a:1',
        BOARD_ROUTER_HEDGE_MIN_DELAY_MS: '50',
        BOARD_ROUTER_HEDGE_MAX_DELAY_MS: '5',
      },
      /must not exceed/,
    ],
  ])('refuses %j', (env, message) => {
    expect(() => loadConfig({}, env)).toThrow(ConfigError);
    expect(() => loadConfig({}, env)).toThrow(message);
  });
  it('accepts IPv6 literals and a port left to its default', () => {
    const c = loadConfig({}, { BOARD_ROUTER_NODES: 'http://[::1]:8787,http://a' });
    expect(c.nodes).toEqual(['http://[::1]:8787', 'http://a']);
  });
  it('reports every problem at once', () => {
    let problems: readonly string[] = [];
    try {
      loadConfig(
        { hedge: 'maybe' },
        {
          BOARD_ROUTER_NODES: 'ftp://a:1,,http://b:2/x',
          BOARD_ROUTER_PORT: 'x',
          BOARD_ROUTER_REQUEST_TIMEOUT_MS: String(2 ** 31),
        },
      );
    } catch (err) {
      if (err instanceof ConfigError) problems = err.problems;
    }
    expect(problems).toEqual([
      expect.stringMatching(/^BOARD_ROUTER_NODES \(--nodes\): "ftp:\/\/a:1" must be an http:\/\/ URL/),
      'BOARD_ROUTER_NODES (--nodes): empty entry in the node list',
      expect.stringMatching(/^BOARD_ROUTER_NODES \(--nodes\): "http:\/\/b:2\/x" must be a base URL/),
      expect.stringMatching(/^BOARD_ROUTER_PORT \(--port\): /),
      expect.stringMatching(/^BOARD_ROUTER_REQUEST_TIMEOUT_MS \(--request-timeout-ms\): /),
      expect.stringMatching(/^BOARD_ROUTER_HEDGE \(--hedge\): /),
    ]);
  });
});

describe('LatencyWindow', () => {
  it('takes the percentile over the last n samples only', () => {
    // Window 160: the percentile is recomputed every 10 samples.
    const w = new LatencyWindow(160, 95);
    expect(w.value()).toBeUndefined();
    for (let i = 1; i <= 160; i++) w.add(i);
    expect(w.value()).toBe(152);
    for (let i = 0; i < 160; i++) w.add(1000);
    expect(w.value()).toBe(1000);
  });
});

describe('HedgeBudget', () => {
  it('allows at most ratio * requests + burst hedges', () => {
    const b = new HedgeBudget(0.1, 3);
    let granted = 0;
    for (let i = 0; i < 1000; i++) {
      b.deposit();
      if (b.tryWithdraw()) granted++;
    }
    expect(granted).toBeLessThanOrEqual(0.1 * 1000 + 3);
    expect(granted).toBeGreaterThanOrEqual(0.1 * 1000 - 1);
  });
  it('grants nothing with ratio 0 and burst 0', () => {
    const b = new HedgeBudget(0, 0);
    for (let i = 0; i < 100; i++) b.deposit();
    expect(b.tryWithdraw()).toBe(false);
  });
});

describe('isRetryable', () => {
  it('retries reads, and mutations only with x-data-idempotent', () => {
    expect(isRetryable('query.execute', {})).toBe(true);
    expect(isRetryable('changes.read', {})).toBe(true);
    expect(isRetryable('node.stats', {})).toBe(true);
    expect(isRetryable('mutate.insert', {})).toBe(false);
    expect(isRetryable('mutate.insert', { 'x-data-idempotent': 'true' })).toBe(true);
    expect(isRetryable('mutate.delete', { 'x-data-idempotent': 'false' })).toBe(false);
    expect(isRetryable('unknown.proc', { 'x-data-idempotent': 'true' })).toBe(false);
  });
});
