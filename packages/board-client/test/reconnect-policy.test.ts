/** The watch reconnect policy (pure): count, window, backoff, and `times: 0`. */
import { describe, expect, it } from 'vitest';
import { nextReconnectDelay } from '../src/watch.js';

describe('watch reconnect policy', () => {
  const config = { retry: { times: 2, delayMs: 50 }, timeoutMs: 10_000 };

  it('retries at least retry.times times, doubling the delay', () => {
    expect(nextReconnectDelay(config, 1, 99_999)).toBe(50);
    expect(nextReconnectDelay(config, 2, 99_999)).toBe(100);
    expect(nextReconnectDelay(config, 3, 99_999)).toBeUndefined();
  });

  it('keeps retrying within timeoutMs of the drop, the delay capped at 1 s', () => {
    expect(nextReconnectDelay(config, 3, 500)).toBe(200);
    expect(nextReconnectDelay(config, 30, 9_999)).toBe(1000);
    expect(nextReconnectDelay(config, 30, 10_000)).toBeUndefined();
  });

  it('never reconnects with times: 0', () => {
    expect(nextReconnectDelay({ retry: { times: 0, delayMs: 50 }, timeoutMs: 10_000 }, 1, 0)).toBeUndefined();
  });
});
