import { describe, expect, test } from 'vitest';
import { clientKey, LoginThrottle, type LoginThrottleOptions } from './login-throttle.js';

/** A throttle on a clock the test moves by hand. */
function throttle(options: Partial<LoginThrottleOptions> = {}) {
  const clock = { now: 1_000_000 };
  const t = new LoginThrottle({
    maxFailures: 3,
    windowMs: 60_000,
    maxGlobalFailures: 0,
    now: () => clock.now,
    ...options,
  });
  const fail = (address: string | undefined, times = 1) => {
    for (let i = 0; i < times; i++) {
      expect(t.refusal(address), `failure ${i + 1} of ${address}`).toBeUndefined();
      t.failed(address);
    }
  };
  return { t, clock, fail };
}

describe('LoginThrottle, per client', () => {
  test('after maxFailures failures in a window the client is refused until the window, opened by its first failure, ends', () => {
    const { t, clock, fail } = throttle();
    fail('10.0.0.1');
    clock.now += 20_000;
    fail('10.0.0.1', 2);
    expect(t.refusal('10.0.0.1')).toBe(40_000);
    clock.now += 39_999;
    expect(t.refusal('10.0.0.1')).toBe(1);
    clock.now += 1;
    expect(t.refusal('10.0.0.1')).toBeUndefined();
    // A new window: three more failures allowed.
    fail('10.0.0.1', 3);
    expect(t.refusal('10.0.0.1')).toBe(60_000);
  });

  test('failures that do not reach the limit within the window are forgotten with it', () => {
    const { t, clock, fail } = throttle();
    fail('10.0.0.1', 2);
    clock.now += 60_000;
    fail('10.0.0.1', 2);
    expect(t.refusal('10.0.0.1')).toBeUndefined();
  });

  test('one client being refused does not affect another', () => {
    const { t, fail } = throttle();
    fail('10.0.0.1', 3);
    expect(t.refusal('10.0.0.1')).toBeGreaterThan(0);
    expect(t.refusal('10.0.0.2')).toBeUndefined();
    expect(t.refusal(undefined)).toBeUndefined();
  });

  test('an IPv6 client counts by its /64, an IPv4-mapped one as its IPv4 address', () => {
    const { t, fail } = throttle();
    fail('2001:db8:0:1::1');
    fail('2001:db8:0:1:ffff::2');
    fail('2001:0db8:0000:0001:aaaa:bbbb:cccc:dddd');
    expect(t.refusal('2001:db8:0:1::99')).toBeGreaterThan(0);
    expect(t.refusal('2001:db8:0:2::1')).toBeUndefined();
    fail('::ffff:192.0.2.1', 3);
    expect(t.refusal('192.0.2.1')).toBeGreaterThan(0);
  });

  test('memory is bounded: past maxClients the client whose window opened first is forgotten', () => {
    const { t, clock, fail } = throttle({ maxClients: 100 });
    fail('10.0.0.1', 3);
    for (let i = 0; i < 150; i++) {
      clock.now += 1;
      fail(`192.0.2.${i}`);
    }
    expect(t.trackedClients).toBe(100);
    expect(t.refusal('10.0.0.1')).toBeUndefined();
  });

  test('0 turns the per-client limit off', () => {
    const { t, fail } = throttle({ maxFailures: 0 });
    fail('10.0.0.1', 1000);
    expect(t.refusal('10.0.0.1')).toBeUndefined();
    expect(t.trackedClients).toBe(0);
  });
});

describe('LoginThrottle, globally', () => {
  test('a guess spread over many addresses empties the bucket; then everyone waits for one failure to refill', () => {
    const { t, clock, fail } = throttle({ maxFailures: 10, maxGlobalFailures: 6 });
    for (let i = 0; i < 6; i++) fail(`10.0.0.${i}`);
    // Nobody got near the per-client limit, yet everyone is refused: 60 s / 6 = 10 s per failure.
    expect(t.refusal('10.0.0.1')).toBe(10_000);
    expect(t.refusal('192.0.2.7')).toBe(10_000);
    clock.now += 4_000;
    expect(t.refusal('192.0.2.7')).toBe(6_000);
    clock.now += 6_000;
    fail('192.0.2.7');
    expect(t.refusal('192.0.2.8')).toBe(10_000);
    // A full window refills the whole bucket, no more.
    clock.now += 10 * 60_000;
    fail('192.0.2.9', 6);
    expect(t.refusal('192.0.2.10')).toBe(10_000);
  });

  test('the longer of the two waits is the answer', () => {
    const { t, clock, fail } = throttle({ maxFailures: 2, maxGlobalFailures: 3 });
    fail('10.0.0.1', 2);
    fail('10.0.0.2');
    expect(t.refusal('10.0.0.1')).toBe(60_000);
    clock.now += 55_000;
    // The bucket refilled meanwhile; the client's own window has 5 s left.
    expect(t.refusal('10.0.0.1')).toBe(5_000);
  });
});

describe('clientKey', () => {
  test.each([
    [undefined, 'unknown'],
    ['', 'unknown'],
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['2001:db8::', '2001:db8:0:0::/64'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['::192.0.2.1', '0:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
  ])('%s -> %s', (address, key) => {
    expect(clientKey(address)).toBe(key);
  });
});
