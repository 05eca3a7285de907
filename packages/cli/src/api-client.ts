import { ERROR_CODES, type ErrorCode } from '@orch/protocol';
import type { Context } from './context-store.js';
import { CliError } from './errors.js';

/** An error answer of the orchestrator, with its stable code. */
export class ApiCallError extends CliError {
  override readonly name = 'ApiCallError';
  constructor(
    readonly code: ErrorCode | 'transport',
    readonly status: number,
    message: string,
  ) {
    super(`orch: ${message} (${code})`);
  }
}

/** Turns an HTTP answer that is not a success into an ApiCallError: the one place this mapping happens. */
function apiErrorFromResponse(status: number, body: unknown): ApiCallError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const code = ERROR_CODES.find((c) => c === error?.code);
  const message =
    typeof error?.message === 'string' ? error.message : `the orchestrator answered http ${status}`;
  return new ApiCallError(code ?? 'internal', status, message);
}

/** A small client of the `/v1` API over fetch. Never follows redirects (a token must not travel elsewhere). */
export class OrchClient {
  constructor(private readonly context: Context) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.context.token) headers.authorization = `Bearer ${this.context.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(`${this.context.url}${path}`, {
        method,
        headers,
        redirect: 'manual',
        signal: AbortSignal.timeout(30_000),
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      throw new ApiCallError(
        'transport',
        0,
        `cannot reach the orchestrator at ${this.context.url}: ${cause}`,
      );
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!res.ok) throw apiErrorFromResponse(res.status, parsed);
    return parsed as T;
  }
}
