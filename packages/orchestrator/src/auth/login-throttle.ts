import { isIPv4, isIPv6 } from 'node:net';

/** Settings of {@link LoginThrottle}; the numbers come from `ORCH_LOGIN_*` (see config.ts). */
export interface LoginThrottleOptions {
  /** Failed logins one client may make in a window before it is refused until the window ends; 0: no limit per client. */
  readonly maxFailures: number;
  /** The window, in milliseconds. */
  readonly windowMs: number;
  /**
   * Failed logins from all clients together per window (a token bucket of this size, refilled
   * evenly over the window), bounding a guess spread over many addresses; 0: no global limit.
   */
  readonly maxGlobalFailures: number;
  /** Clients tracked at most; past it, the one whose window started first is forgotten. */
  readonly maxClients?: number;
  /** The clock (milliseconds), for tests. */
  readonly now?: () => number;
}

/** Clients whose failures {@link LoginThrottle} tracks at most, by default. */
export const DEFAULT_MAX_CLIENTS = 10_000;

/**
 * The failed-login throttle of `POST /login`. Per client (the TCP peer address; an IPv6 client
 * counts by its /64, which one host usually holds whole, and an IPv4-mapped address as its IPv4):
 * the first failure opens a window of `windowMs`; once `maxFailures` failures fall in it, every
 * login from that client, the right token included, is refused until the window ends. Globally: a
 * bucket of `maxGlobalFailures` failures refills evenly over a window; when it is empty every
 * login is refused until one failure's worth has refilled. A refusal costs nothing from either
 * count, and a success resets nothing (an attacker sharing an address with the operator gains
 * nothing from the operator's logins). Memory is bounded by `maxClients`.
 *
 * State per client (window start `t0`, failures `n`):
 *
 * ```
 *   (untracked) --failure--> n=1, t0=now --failure--> n+1 ... n=maxFailures: refused
 *        ^                                                           |
 *        +------------------- now >= t0 + windowMs ------------------+
 * ```
 *
 * @example
 * const throttle = new LoginThrottle({ maxFailures: 10, windowMs: 60_000, maxGlobalFailures: 100 });
 * const waitMs = throttle.refusal(address);   // undefined: go ahead
 * if (!tokenIsRight) throttle.failed(address);
 */
export class LoginThrottle {
  readonly #options: Required<LoginThrottleOptions>;
  /** Per client: when its window started and how many failures fell in it; oldest window first. */
  readonly #clients = new Map<string, { start: number; failures: number }>();
  #tokens: number;
  #refilledAt: number;

  constructor(options: LoginThrottleOptions) {
    this.#options = { maxClients: DEFAULT_MAX_CLIENTS, now: Date.now, ...options };
    this.#tokens = options.maxGlobalFailures;
    this.#refilledAt = this.#options.now();
  }

  /** How many clients are tracked now (for tests of the memory bound). */
  get trackedClients(): number {
    return this.#clients.size;
  }

  /**
   * Milliseconds until `address` may try to log in again, or undefined when it may now. Check
   * this before comparing the token, so that a throttled client learns nothing about it.
   */
  refusal(address: string | undefined): number | undefined {
    const now = this.#options.now();
    let waitMs = 0;
    const { maxFailures, maxGlobalFailures, windowMs } = this.#options;
    if (maxGlobalFailures > 0) {
      this.#refill(now);
      if (this.#tokens < 1) waitMs = ((1 - this.#tokens) * windowMs) / maxGlobalFailures;
    }
    if (maxFailures > 0) {
      const entry = this.#entry(clientKey(address), now);
      if (entry && entry.failures >= maxFailures) waitMs = Math.max(waitMs, entry.start + windowMs - now);
    }
    return waitMs > 0 ? waitMs : undefined;
  }

  /** Counts a failed login (a wrong token) from `address`. */
  failed(address: string | undefined): void {
    const now = this.#options.now();
    const { maxFailures, maxGlobalFailures, maxClients } = this.#options;
    if (maxGlobalFailures > 0) {
      this.#refill(now);
      this.#tokens = Math.max(0, this.#tokens - 1);
    }
    if (maxFailures === 0) return;
    const key = clientKey(address);
    const entry = this.#entry(key, now);
    if (entry) {
      entry.failures++;
      return;
    }
    for (const oldest of this.#clients.keys()) {
      if (this.#clients.size < maxClients) break;
      this.#clients.delete(oldest);
    }
    this.#clients.set(key, { start: now, failures: 1 });
  }

  /** The client's entry if its window is still open (an ended one is dropped). */
  #entry(key: string, now: number): { start: number; failures: number } | undefined {
    const entry = this.#clients.get(key);
    if (entry && now >= entry.start + this.#options.windowMs) {
      this.#clients.delete(key);
      return undefined;
    }
    return entry;
  }

  #refill(now: number): void {
    const { maxGlobalFailures, windowMs } = this.#options;
    const elapsed = Math.max(0, now - this.#refilledAt);
    this.#tokens = Math.min(maxGlobalFailures, this.#tokens + (elapsed * maxGlobalFailures) / windowMs);
    this.#refilledAt = now;
  }
}

/**
 * The key a client's failures count under: an IPv4 address as it is (IPv4-mapped IPv6 unwrapped),
 * an IPv6 address as its /64 (`2001:db8:0:1::/64`), anything else as it is, and no address at all
 * as `unknown` (one shared count).
 */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIPv4(address) || !isIPv6(address)) return address;
  const plain = address.split('%')[0]!;
  const [head = '', tail] = plain.split('::');
  const groups = head === '' ? [] : head.split(':');
  if (tail !== undefined) {
    // Groups after '::' (an embedded IPv4 address counts as two); the gap is zeros.
    const after = tail === '' ? [] : tail.split(':');
    const width = after.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
    groups.push(...Array<string>(8 - groups.length - width).fill('0'), ...after);
  }
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
