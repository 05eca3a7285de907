import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { sleep } from './sleep.js';
import { MAX_TIMER_MS, setLongTimeout } from './timers.js';

const DAY = 24 * 3600 * 1000;

describe('setLongTimeout', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test('a 30-day delay does not fire early: it re-arms past 2^31-1 ms', () => {
    const fn = vi.fn();
    setLongTimeout(fn, 30 * DAY);
    vi.advanceTimersByTime(MAX_TIMER_MS + 1);
    expect(fn).not.toHaveBeenCalled();
    vi.advanceTimersByTime(29 * DAY - MAX_TIMER_MS);
    expect(fn).not.toHaveBeenCalled();
    vi.advanceTimersByTime(DAY);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('short and non-positive delays fire like setTimeout; clear() cancels', () => {
    const a = vi.fn();
    const b = vi.fn();
    const c = vi.fn();
    setLongTimeout(a, 10);
    setLongTimeout(b, -5);
    const t = setLongTimeout(c, 3 * MAX_TIMER_MS);
    vi.advanceTimersByTime(10);
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(MAX_TIMER_MS);
    t.clear();
    vi.advanceTimersByTime(3 * MAX_TIMER_MS);
    expect(c).not.toHaveBeenCalled();
  });

  test('Infinity never fires', () => {
    const fn = vi.fn();
    setLongTimeout(fn, Number.POSITIVE_INFINITY);
    vi.advanceTimersByTime(10 * MAX_TIMER_MS);
    expect(fn).not.toHaveBeenCalled();
  });

  test('sleep waits long delays in full and ends early on abort', async () => {
    let done = false;
    const p = sleep(40 * DAY).then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(39 * DAY);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(DAY);
    await p;
    expect(done).toBe(true);

    const ac = new AbortController();
    let early = false;
    const q = sleep(DAY, ac.signal).then(() => {
      early = true;
    });
    ac.abort();
    await q;
    expect(early).toBe(true);
  });
});
