import { ERROR_STATUS, type ErrorBody, type ErrorCode } from '@orch/protocol';

/**
 * The one error type of the agent. `code` is the wire code of the shared envelope; `status` is the
 * code's HTTP status (ERROR_STATUS) unless a route says otherwise. `details` must be non-sensitive
 * (ids, sizes, reasons), never a secret. Mapped to HTTP in exactly one place: `api/app.ts`.
 */
export class AgentError extends Error {
  override readonly name = 'AgentError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    status?: number,
  ) {
    super(message);
    this.status = status ?? ERROR_STATUS[code];
  }

  /** The wire envelope `{ error: { code, message, details? } }`. */
  toBody(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details && Object.keys(this.details).length > 0 ? { details: this.details } : {}),
      },
    };
  }

  static invalid(message: string, details?: Record<string, unknown>): AgentError {
    return new AgentError('invalid_argument', message, details);
  }

  static notFound(what: string, id: string): AgentError {
    return new AgentError('not_found', `${what} ${JSON.stringify(id)} not found`, { id });
  }

  static conflict(message: string, details?: Record<string, unknown>): AgentError {
    return new AgentError('conflict', message, details);
  }

  static unavailable(message: string, details?: Record<string, unknown>): AgentError {
    return new AgentError('unavailable', message, details);
  }

  /** The host's disk is full (or would be): `unavailable` with `details.reason = "disk_full"`. */
  static diskFull(message: string, details: Record<string, unknown> = {}): AgentError {
    return new AgentError('unavailable', message, { reason: 'disk_full', ...details });
  }

  /** QEMU (or another host tool) is not installed: `unavailable` with `details.reason = "missing_tool"`. */
  static missingTool(tool: string, hint: string): AgentError {
    return new AgentError('unavailable', `${tool} is not installed on this host: ${hint}`, {
      reason: 'missing_tool',
      tool,
    });
  }
}

/** True for the errno of a full disk. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT' || /No space left on device/i.test(String(err));
}
