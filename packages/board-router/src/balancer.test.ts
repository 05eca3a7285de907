import { describe, expect, it } from 'vitest';
import { BALANCER_DECAY_MS, LatencyBalancer } from './balancer.js';

/** A small deterministic generator (mulberry32), so the choices are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Sequential requests against nodes with fixed latencies; the clock advances by each answer. */
function run(latency: Record<string, number | ((i: number) => number)>, requests: number) {
  let clock = 0;
  const b = new LatencyBalancer<string>({ now: () => clock, random: seeded(7) });
  const nodes = Object.keys(latency);
  const served: Record<string, number> = Object.fromEntries(nodes.map((n) => [n, 0]));
  for (let i = 0; i < requests; i++) {
    const node = b.choose(nodes) as string;
    served[node] = (served[node] ?? 0) + 1;
    const l = latency[node] as number | ((i: number) => number);
    const ms = typeof l === 'function' ? l(served[node] ?? 0) : l;
    b.started(node);
    clock += ms;
    b.finished(node, ms);
  }
  return { served, balancer: b, advance: (ms: number) => (clock += ms) };
}

describe('latency-aware balancer (power of two choices over a peak EWMA)', () => {
  it('sends a consistently slow node (200 ms vs 3 ms) almost nothing', () => {
    const { served } = run({ a: 3, b: 3, slow: 200 }, 3000);
    expect(served.slow).toBeLessThan(3000 * 0.02);
    expect(served.a).toBeGreaterThan(1000);
    expect(served.b).toBeGreaterThan(1000);
  });

  it('spreads requests over nodes of equal latency', () => {
    const { served } = run({ a: 3, b: 3, c: 3 }, 3000);
    for (const n of ['a', 'b', 'c']) expect(served[n]).toBeGreaterThan(3000 / 3 / 2);
  });

  it('moves traffic away from a node that is occasionally slow (every 10th answer 100 ms late)', () => {
    const { served } = run({ a: 3, flaky: (i) => (i % 10 === 0 ? 100 : 3) }, 3000);
    expect(served.flaky).toBeLessThan(served.a ?? 0);
  });

  it('tries a shunned node again once its average has decayed, and forgets it again if still slow', () => {
    const { balancer, advance } = run({ a: 3, slow: 200 }, 500);
    expect(balancer.choose(['a', 'slow'])).toBe('a');
    advance(BALANCER_DECAY_MS * 10); // no samples for a while: both averages decay towards 0
    balancer.finished('a', 3);
    balancer.started('a'); // one request in flight on a: cost 3 x 2
    expect(balancer.choose(['a', 'slow'])).toBe('slow');
    balancer.started('slow');
    balancer.finished('slow', 200);
    expect(balancer.choose(['a', 'slow'])).toBe('a');
  });

  it('counts requests in flight: a node with many open requests loses against an equally fast idle one', () => {
    const b = new LatencyBalancer<string>({ now: () => 0, random: seeded(1) });
    for (const n of ['a', 'b']) {
      b.started(n);
      b.finished(n, 5);
    }
    for (let i = 0; i < 4; i++) b.started('a');
    expect(b.choose(['a', 'b'])).toBe('b');
    expect(b.choose(['a'])).toBe('a');
    expect(b.choose([])).toBeUndefined();
  });
});
