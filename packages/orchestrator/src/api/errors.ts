import { ERROR_STATUS, type ErrorBody, type ErrorCode } from '@orch/protocol';

/**
 * The one error type the API raises. Its `code` is the wire code; `status` defaults to the code's
 * status (ERROR_STATUS) and is overridden only where the spec says so (403 for master-only
 * refusals, 413 for oversized bodies). `details` must be non-sensitive.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    status?: number,
    /** Extra response headers (for example WWW-Authenticate). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.status = status ?? ERROR_STATUS[code];
  }

  toBody(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details && Object.keys(this.details).length > 0 ? { details: this.details } : {}),
      },
    };
  }

  static invalid(message: string, details?: Record<string, unknown>): ApiError {
    return new ApiError('invalid_argument', message, details);
  }

  static notFound(what: string, id: string): ApiError {
    return new ApiError('not_found', `${what} ${JSON.stringify(id)} not found`, { id });
  }

  static unavailable(message: string, details?: Record<string, unknown>): ApiError {
    return new ApiError('unavailable', message, details);
  }
}
