/**
 * The longest delay Node's timers honour: a `setTimeout` beyond 2^31-1 ms fires at once (with a
 * `TimeoutOverflowWarning`). Every timer whose delay is derived from input (token expiry, a VM's
 * max runtime, a configured interval) goes through {@link setLongTimeout} instead.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer armed by {@link setLongTimeout}. */
export interface LongTimer {
  /** Cancels the timer; idempotent. */
  clear(): void;
  /** Lets the process exit while the timer is pending (like `Timeout.unref()`); returns the timer. */
  unref(): LongTimer;
}

/**
 * Calls `fn` once after `ms` milliseconds, for any `ms`: delays beyond {@link MAX_TIMER_MS} are
 * waited in steps (the timer re-arms itself until the deadline), so they never fire early.
 * Negative, NaN or zero delays fire on the next turn; `Infinity` never fires.
 * @example
 * const expiry = setLongTimeout(() => stream.close(), token.exp * 1000 - Date.now());
 * // ... on close: expiry.clear();
 */
export function setLongTimeout(fn: () => void, ms: number, now: () => number = Date.now): LongTimer {
  const deadline = now() + (Number.isNaN(ms) ? 0 : Math.max(0, ms));
  let handle: NodeJS.Timeout | undefined;
  let unrefed = false;
  let cleared = false;
  const arm = () => {
    if (cleared) return;
    const left = deadline - now();
    if (left === Number.POSITIVE_INFINITY) return;
    if (left <= MAX_TIMER_MS) {
      handle = setTimeout(
        () => {
          if (!cleared) fn();
        },
        Math.max(0, left),
      );
    } else {
      handle = setTimeout(arm, MAX_TIMER_MS);
    }
    if (unrefed) handle.unref();
  };
  arm();
  const timer: LongTimer = {
    clear() {
      cleared = true;
      if (handle) clearTimeout(handle);
    },
    unref() {
      unrefed = true;
      handle?.unref();
      return timer;
    },
  };
  return timer;
}
