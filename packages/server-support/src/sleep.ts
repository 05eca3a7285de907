import { setLongTimeout } from './timers.js';

/** How a loop waits; injectable so tests control time. Resolves early (never rejects) on abort. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/**
 * The one `sleep`: resolves after `ms` milliseconds, or as soon as `signal` aborts. Never
 * rejects, so a loop reads `await sleep(ms, signal); if (signal.aborted) ...`. Any `ms` is safe
 * (long delays do not fire early, see `setLongTimeout`).
 * @example
 * while (!signal.aborted) { await poll(); await sleep(500, signal); }
 */
export const sleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      timer.clear();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setLongTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
