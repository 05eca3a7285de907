import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { TokenBox } from '../crypto/token-box.js';
import { CidrAllowlist } from './cidr-allowlist.js';
import { SessionSigner } from './session-cookie.js';

describe('CidrAllowlist', () => {
  const list = new CidrAllowlist(['10.0.0.0/8', '127.0.0.1/32', 'fd00::/8']);
  test.each([
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['127.0.0.1', true],
    ['127.0.0.2', false],
    ['::ffff:10.9.9.9', true],
    ['::ffff:8.8.8.8', false],
    ['fd12::1', true],
    ['::1', false],
    [undefined, false],
  ])('%s -> %s', (address, allowed) => {
    expect(list.allows(address)).toBe(allowed);
  });
  test('empty allows everyone', () => {
    expect(new CidrAllowlist([]).allows('8.8.8.8')).toBe(true);
  });
});

describe('SessionSigner', () => {
  const signer = new SessionSigner('master');
  test('accepts its own values and rejects tampering, other masters and expiry', () => {
    const value = signer.issue(1_000_000);
    expect(signer.verify(value, 1_000_000)).toBe(true);
    expect(new SessionSigner('other').verify(value, 1_000_000)).toBe(false);
    expect(signer.verify(`${value}x`, 1_000_000)).toBe(false);
    expect(signer.verify(`e30.${value.split('.')[1]}`, 1_000_000)).toBe(false);
    expect(signer.verify(value, 1_000_000 + 7 * 24 * 3600 * 1000 + 1000)).toBe(false);
    expect(signer.verify('', 0)).toBe(false);
    expect(value).not.toContain('master');
  });
});

describe('TokenBox', () => {
  test('round-trips, uses a fresh IV, and refuses another key or tampering', () => {
    const box = new TokenBox(randomBytes(32));
    const a = box.seal('agent-token');
    expect(box.open(a)).toBe('agent-token');
    expect(box.seal('agent-token')).not.toBe(a);
    expect(a).not.toContain('agent-token');
    expect(() => new TokenBox(randomBytes(32)).open(a)).toThrow();
    expect(() => box.open(`${a.slice(0, -2)}AA`)).toThrow();
  });
});
