import { describe, expect, test, vi } from 'vitest';
import { Periodic } from './periodic.js';
import { runServices, type Service } from './service.js';

describe('Periodic', () => {
  test('rounds run one interval apart with the injected clock, a failing round is logged, abort stops it', async () => {
    const ac = new AbortController();
    const waits: number[] = [];
    const seen: number[] = [];
    let t = 1_000;
    const warn = vi.fn();
    const loop = new Periodic({
      name: 'sweep',
      intervalMs: 250,
      log: { warn } as never,
      clock: () => t,
      sleep: async (ms) => {
        waits.push(ms);
        t += ms;
      },
      tick: async ({ now }) => {
        seen.push(now.getTime());
        if (seen.length === 2) throw new Error('store down');
        if (seen.length === 4) ac.abort();
      },
    });
    await loop.run(ac.signal);
    expect(seen).toEqual([1_000, 1_250, 1_500, 1_750]);
    expect(waits).toEqual([250, 250, 250]);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]?.[1]).toBe('sweep round failed');
  });

  test('delayFirst waits one interval before the first round', async () => {
    const ac = new AbortController();
    const order: string[] = [];
    const loop = new Periodic({
      name: 'probe',
      intervalMs: 5,
      delayFirst: true,
      log: { warn: () => undefined } as never,
      sleep: async () => {
        order.push('wait');
      },
      tick: async () => {
        order.push('tick');
        ac.abort();
      },
    });
    await loop.run(ac.signal);
    expect(order).toEqual(['wait', 'tick']);
  });
});

describe('runServices', () => {
  test('one failing service stops the others and its error is rethrown', async () => {
    let stoppedCleanly = false;
    const waiter: Service = {
      name: 'waiter',
      run: (signal) =>
        new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => {
            stoppedCleanly = true;
            resolve();
          }),
        ),
    };
    const broken: Service = { name: 'broken', run: async () => Promise.reject(new Error('cannot bind')) };
    await expect(runServices(new AbortController().signal, [waiter, broken])).rejects.toThrow('cannot bind');
    expect(stoppedCleanly).toBe(true);
  });
});
