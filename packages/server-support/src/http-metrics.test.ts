import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, HttpMetrics, metricsAnswer, UNMATCHED_ROUTE } from './http-metrics.js';
import { parseMetrics } from './testing.js';

describe('HttpMetrics', () => {
  it('counts requests by template, normalised method and status, with process metrics', async () => {
    const registry = createMetricsRegistry();
    const http = new HttpMetrics(registry, 'demo');
    const mw = http.middleware(
      (c: { req: { method: string }; res: { status: number }; route?: string }) => c.route,
    );
    await mw(
      { req: { method: 'GET' }, res: { status: 200 }, route: '/v1/things/:id' },
      async () => undefined,
    );
    await mw({ req: { method: 'BREW' }, res: { status: 404 }, route: '*' }, async () => undefined);
    const answer = await metricsAnswer(registry);
    expect(answer.contentType).toMatch(/^text\/plain; version=0.0.4/);
    const m = parseMetrics(answer.body);
    expect(
      m.value('demo_http_requests_total', { route: '/v1/things/:id', method: 'GET', status: '200' }),
    ).toBe(1);
    expect(
      m.value('demo_http_requests_total', { route: UNMATCHED_ROUTE, method: 'OTHER', status: '404' }),
    ).toBe(1);
    expect(m.family('demo_http_request_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(m.family('process_cpu_user_seconds_total')?.type).toBe('COUNTER');
    expect(m.family('nodejs_heap_size_used_bytes')?.type).toBe('GAUGE');
  });

  it('records a request whose handler threw', async () => {
    const http = new HttpMetrics(createMetricsRegistry(), 'demo');
    const mw = http.middleware(() => '/x');
    await expect(
      mw({ req: { method: 'POST' }, res: { status: 500 } }, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const m = parseMetrics(await http.registry.metrics());
    expect(m.value('demo_http_requests_total', { route: '/x', method: 'POST' })).toBe(1);
  });
});
