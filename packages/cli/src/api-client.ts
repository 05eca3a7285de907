import { type ErrorCode, type ErrorDetails, errorFromBody, type OrchError } from '@orch/protocol';
import type { Context } from './context-store.js';
import { CliError } from './errors.js';

/**
 * An error answer of the orchestrator (or no answer: code `transport`), printed by the entry point
 * as `orch: <message> (<code>)`. `error` is the protocol's typed error ({@link errorFromBody}),
 * with the server's code, status and details.
 */
export class ApiCallError extends CliError {
  override readonly name = 'ApiCallError';
  readonly code: ErrorCode | 'transport';
  readonly status: number;
  readonly details: ErrorDetails | undefined;

  constructor(
    readonly error: OrchError | undefined,
    transportMessage = '',
  ) {
    super(`orch: ${error ? error.message : transportMessage} (${error ? error.code : 'transport'})`);
    this.code = error ? error.code : 'transport';
    this.status = error ? error.status : 0;
    this.details = error?.details;
  }
}

/**
 * Turns an answer that is not a success into an {@link ApiCallError}: the one place the CLI maps
 * answers back to errors (the API client and the attach upgrade both use it).
 */
export function apiErrorFromResponse(status: number, text: string): ApiCallError {
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return new ApiCallError(errorFromBody(status, body));
}

/** A small client of the `/v1` API over fetch. Never follows redirects (a token must not travel elsewhere). */
export class OrchClient {
  constructor(private readonly context: Context) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.send(method, path, { body, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (!res.ok) throw apiErrorFromResponse(res.status, text);
    try {
      return (text === '' ? undefined : JSON.parse(text)) as T;
    } catch {
      throw new ApiCallError(undefined, `the orchestrator at ${this.context.url} did not answer JSON`);
    }
  }

  /**
   * A `GET` whose successful answer is read by the caller as it arrives (a log, a stream); `signal`
   * bounds it (no time limit of its own). Failures are {@link ApiCallError}s.
   */
  async open(path: string, signal?: AbortSignal): Promise<Response> {
    const res = await this.send('GET', path, { accept: '*/*', ...(signal ? { signal } : {}) });
    if (!res.ok) throw apiErrorFromResponse(res.status, await res.text());
    return res;
  }

  private async send(
    method: string,
    path: string,
    opts: { body?: unknown; signal?: AbortSignal; accept?: string },
  ): Promise<Response> {
    const headers: Record<string, string> = { accept: opts.accept ?? 'application/json' };
    if (this.context.token) headers.authorization = `Bearer ${this.context.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetch(`${this.context.url}${path}`, {
        method,
        headers,
        redirect: 'manual',
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      throw new ApiCallError(undefined, `cannot reach the orchestrator at ${this.context.url}: ${cause}`);
    }
  }
}
