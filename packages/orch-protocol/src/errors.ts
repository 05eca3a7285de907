import { z } from 'zod';

/** The error codes of orchestrator.md ("Errors"). */
export const ERROR_CODES = [
  'not_found',
  'route_not_found',
  'unauthorized',
  'forbidden',
  'conflict',
  'invalid_argument',
  'unavailable',
  'internal',
  'unimplemented',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** `{ error: { code, message, details? } }`: the body of every error answer. */
export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES),
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .meta({ id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBody>;

/**
 * HTTP status of each code. The spec fixes 404, 403 and leaves the rest open; `unauthorized` is 401
 * for a missing or invalid caller token and 403 for a master-only refusal (the server picks).
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  not_found: 404,
  route_not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  conflict: 409,
  invalid_argument: 400,
  unavailable: 503,
  internal: 500,
  unimplemented: 501,
};

/** Structured, non-sensitive metadata of an error (ids, counts, reasons); never a secret. */
export type ErrorDetails = Readonly<Record<string, unknown>>;

/**
 * The one error class of the orchestrator's wire contract, used by `orchd`, `orch-agent`, `orch`
 * and the dashboard: a stable `code`, the HTTP `status` as data (the code's {@link ERROR_STATUS}
 * unless a route says otherwise, for example 403 for a master-only refusal or 413 for an oversized
 * body), a human `message` and structured `details`. Each server turns it into an answer in exactly
 * one place (its `onError`); each client turns an answer back into one with {@link errorFromBody}.
 *
 * @example
 * throw new OrchError('conflict', 'environment env_1 is stopped, not running', { state: 'stopped' });
 * throw OrchError.notFound('host', 'h1');              // 404 { code: 'not_found', details: { id: 'h1' } }
 */
export class OrchError extends Error {
  override readonly name: string = 'OrchError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
    status?: number,
    /** Extra response headers (for example `WWW-Authenticate`); never part of the body. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.status = status ?? ERROR_STATUS[code];
  }

  /** The wire envelope `{ error: { code, message, details? } }` (details omitted when empty). */
  toBody(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details && Object.keys(this.details).length > 0 ? { details: { ...this.details } } : {}),
      },
    };
  }

  static invalid(message: string, details?: ErrorDetails): OrchError {
    return new OrchError('invalid_argument', message, details);
  }

  static notFound(what: string, id: string): OrchError {
    return new OrchError('not_found', `${what} ${JSON.stringify(id)} not found`, { id });
  }

  static conflict(message: string, details?: ErrorDetails): OrchError {
    return new OrchError('conflict', message, details);
  }

  static unavailable(message: string, details?: ErrorDetails): OrchError {
    return new OrchError('unavailable', message, details);
  }

  /** The host's disk is full (or would be): `unavailable` with `details.reason = "disk_full"`. */
  static diskFull(message: string, details: ErrorDetails = {}): OrchError {
    return new OrchError('unavailable', message, { reason: 'disk_full', ...details });
  }

  /**
   * Too many attempts (failed logins): `429 unavailable` with `details.reason = "rate_limited"`,
   * `details.retry_after_seconds` and a `Retry-After` header saying when to try again. The spec's
   * code table has no rate-limit code; `unavailable` says "not now, try later", and the status
   * tells it apart from an outage (503).
   *
   * @example
   * throw OrchError.rateLimited('too many failed logins from your address', 42);
   * // 429 { code: 'unavailable', details: { reason: 'rate_limited', retry_after_seconds: 42 } }, Retry-After: 42
   */
  static rateLimited(message: string, retryAfterSeconds: number): OrchError {
    const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
    return new OrchError(
      'unavailable',
      message,
      { reason: 'rate_limited', retry_after_seconds: seconds },
      429,
      { 'Retry-After': String(seconds) },
    );
  }

  /**
   * Not now, come back after `retryAfterSeconds` (a full placement queue, a contended host): `503
   * unavailable` with `details.reason`, `details.retry_after_seconds` (whole seconds, at least 1)
   * and a `Retry-After` header. Unlike {@link rateLimited}, nothing the caller did is refused: the
   * server is busy, and the same request later is expected to succeed.
   *
   * @example
   * throw OrchError.busy('the placement queue is full (1024 creates waiting)', 'placement_queue_full', 2);
   * // 503 { code: 'unavailable', details: { reason: 'placement_queue_full', retry_after_seconds: 2 } }, Retry-After: 2
   */
  static busy(
    message: string,
    reason: string,
    retryAfterSeconds: number,
    details: ErrorDetails = {},
  ): OrchError {
    const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
    return new OrchError('unavailable', message, { reason, retry_after_seconds: seconds, ...details }, 503, {
      'Retry-After': String(seconds),
    });
  }

  /** A host tool (QEMU) is not installed: `unavailable` with `details.reason = "missing_tool"`. */
  static missingTool(tool: string, hint: string): OrchError {
    return new OrchError('unavailable', `${tool} is not installed on this host: ${hint}`, {
      reason: 'missing_tool',
      tool,
    });
  }
}

/**
 * The typed error of an error answer: `body` (parsed JSON, or undefined) is checked with
 * {@link ErrorBody}; an answer that is not the envelope becomes `internal` (5xx), `unavailable`
 * (503, 429) or `invalid_argument` (other statuses) with a message naming the status, so a caller
 * always gets an {@link OrchError}. The one place each client maps answers back to errors.
 *
 * @example
 * const res = await fetch(url);
 * if (!res.ok) throw errorFromBody(res.status, await res.json().catch(() => undefined));
 */
export function errorFromBody(status: number, body: unknown): OrchError {
  const parsed = ErrorBody.safeParse(body);
  if (parsed.success) {
    const { code, message, details } = parsed.data.error;
    return new OrchError(code, message, details, status);
  }
  const code: ErrorCode =
    status === 503 || status === 429
      ? 'unavailable'
      : status >= 500
        ? 'internal'
        : status === 404
          ? 'route_not_found'
          : 'invalid_argument';
  return new OrchError(code, `http ${status} without an error envelope`, { status }, status);
}

/** How many validation issues an error's `details.issues` lists at most; the rest are counted. */
export const MAX_DETAIL_ISSUES = 20;

/**
 * The `details` of a validation failure: the first {@link MAX_DETAIL_ISSUES} issues (field and
 * message, each cut to 200 characters) and `issue_count`, so the answer to a huge invalid
 * body stays small.
 */
export function issuesDetails(
  issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[],
  where = 'body',
): { issues: { field: string; message: string }[]; issue_count: number } {
  return {
    issues: issues.slice(0, MAX_DETAIL_ISSUES).map((i) => ({
      field: (i.path.map(String).join('.') || where).slice(0, 200),
      message: i.message.slice(0, 200),
    })),
    issue_count: issues.length,
  };
}
