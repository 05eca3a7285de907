import type { CreateEnvironmentRequest } from '@orch/protocol';
import type { Principal } from '../auth/authenticator.js';
import { sha256Hex } from '../crypto/secrets.js';

/** The idempotency key a create was sent with, and whose key it is. */
export interface CreateKey {
  /** Who sent it: `master`, `api_key:<id>` or `anonymous` (keys of different callers never meet). */
  readonly scope: string;
  /** The `Idempotency-Key` header, as sent. */
  readonly key: string;
}

/** The scope of a caller's idempotency keys. */
export function keyScope(principal: Principal | undefined): string {
  if (principal?.kind === 'api_key') return `api_key:${principal.id}`;
  return principal?.kind ?? 'anonymous';
}

/**
 * What identifies a create request for its idempotency key: the SHA-256 of the request as
 * validated, with the secret values left out (only their names), so the store never keeps a hash
 * of a secret. A retry of the same request has the same fingerprint; another request under the
 * same key does not, and is refused.
 */
export function requestFingerprint(req: CreateEnvironmentRequest): string {
  return sha256Hex(JSON.stringify({ ...req, secrets: Object.keys(req.secrets).sort() }));
}
