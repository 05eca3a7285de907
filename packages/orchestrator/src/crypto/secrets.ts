import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** SHA-256 hex of a secret: how API keys are stored and looked up. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Constant-time comparison of two secrets of any length: both are hashed first, so neither the
 * content nor the length of the expected value leaks through timing.
 */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** A random identifier with a readable prefix, e.g. `key_3kT9...`. */
export function randomId(prefix: string, bytes = 9): string {
  return `${prefix}${randomBytes(bytes).toString('base64url')}`;
}

/**
 * The id of an environment, snapshot, build or move: the prefix and 12 random bytes in base64url,
 * whose alphabet is letters, digits, `_` and `-` (no padding), so it is an agent id (`AGENT_ID`
 * of @orch/protocol) as it stands.
 */
export function recordId(prefix: string): string {
  return randomId(prefix, 12);
}
