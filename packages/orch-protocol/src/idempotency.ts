import { z } from 'zod';

/**
 * The request header that makes `POST /v1/environments` idempotent: a retry carrying the same key
 * (from the same caller, within the server's retention) is answered with the environment the first
 * request created instead of creating a second one. `orch up` sends one per invocation and reuses
 * it on its own retries.
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** The header that marks an answer as the replay of an earlier create with the same key (`true`). */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** Longest idempotency key accepted (a UUID is 36 characters). */
export const MAX_IDEMPOTENCY_KEY = 255;

/**
 * An idempotency key: 1 to {@link MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces
 * (a UUID, a ULID, a job id). Anything else is refused, never trimmed or rewritten.
 */
export const IdempotencyKey = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_IDEMPOTENCY_KEY, `must be at most ${MAX_IDEMPOTENCY_KEY} characters`)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (for example a UUID)');
