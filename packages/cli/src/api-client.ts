import { type ErrorCode, type ErrorDetails, errorFromBody, type OrchError } from '@orch/protocol';
import { z } from 'zod';
import { type Context, tokenProblem } from './context-store.js';
import { CliError } from './errors.js';
import { describeIssues } from './issues.js';

/**
 * The codes of failures that are not the orchestrator's error answers: `transport` (no answer, or
 * an answer cut short or too slow) and `bad_answer` (an answer the CLI will not use: too large,
 * not JSON, or not the shape the route answers).
 */
export type LocalErrorCode = 'transport' | 'bad_answer';

/**
 * An error answer of the orchestrator, or a failure to get a usable one ({@link LocalErrorCode}),
 * printed by the entry point as `orch: <message> (<code>)`. `error` is the protocol's typed error
 * ({@link errorFromBody}) of an error answer, with the server's code, status and details.
 */
export class ApiCallError extends CliError {
  override readonly name = 'ApiCallError';
  readonly code: ErrorCode | LocalErrorCode;
  readonly status: number;
  readonly details: ErrorDetails | undefined;

  constructor(
    readonly error: OrchError | undefined,
    localMessage = '',
    localCode: LocalErrorCode = 'transport',
  ) {
    super(`orch: ${error ? error.message : localMessage} (${error ? error.code : localCode})`);
    this.code = error ? error.code : localCode;
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

/**
 * What went wrong on the wire, in words that never quote the request: fetch's own messages can
 * hold header values (the token), so only a timeout and the system's error code are reported.
 */
export function transportProblem(err: unknown, timeoutMs?: number): string {
  const name = (err as { name?: unknown } | undefined)?.name;
  if (name === 'TimeoutError' && timeoutMs !== undefined)
    return `no complete answer within ${timeoutMs / 1000} s`;
  const code = (err as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,63}$/.test(code)) return code;
  return name === 'AbortError' ? 'the request was interrupted' : 'the request failed';
}

/** The answer to a route that answers 204 (no body). */
export const NoContent = z.undefined();

/**
 * The most of one answer the CLI reads: 64 MiB, far above any list the orchestrator sends, far
 * below what would exhaust the process. A larger answer is refused as it streams in.
 */
export const ANSWER_LIMIT_BYTES = 64 * 2 ** 20;

/**
 * How long one call (`call`) may take, answer read in full, unless the call says otherwise: a
 * call whose answer waits for an agent passes its own deadline, derived from how long orchd waits
 * (`clientDeadlineMs` of `@orch/protocol`: an exec its `--timeout` plus margins, a pause or resume
 * orchd's 300 s, a snapshot 600 s, a restore a transfer's 1800 s).
 */
export const CALL_TIMEOUT_MS = 30_000;

/** Options of one {@link OrchClient.call}. */
export interface CallOptions {
  /** This call's deadline (default: the client's, {@link CALL_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Sent besides the credentials (an `Idempotency-Key`). */
  readonly headers?: Record<string, string>;
}

/**
 * Node's `fetch` gives up on an answer whose head takes longer than 300 s (undici's
 * `headersTimeout`), whatever the call's deadline; a call allowed that long goes through undici's
 * own fetch with a dispatcher without that limit (loaded only then), bounded by its signal.
 */
const FETCH_HEADERS_LIMIT_MS = 300_000;

async function fetchWithin(url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
  if (timeoutMs < FETCH_HEADERS_LIMIT_MS) return fetch(url, init);
  const loaded = await import('undici');
  // A CommonJS package: bundled, its exports are the namespace's default only.
  const undici = (loaded as unknown as { default?: typeof loaded }).default ?? loaded;
  const dispatcher = new undici.Agent({ headersTimeout: 0, bodyTimeout: 0 });
  return undici.fetch(url, { ...(init as object), dispatcher }) as unknown as Promise<Response>;
}

export interface OrchClientOptions {
  /** Default {@link ANSWER_LIMIT_BYTES}. */
  readonly answerLimitBytes?: number;
  /** Default {@link CALL_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
}

/**
 * A small client of the `/v1` API over fetch. Never follows redirects (a token must not travel
 * elsewhere). Every answer is read with a size cap and checked with the schema of the route, so a
 * command sees either an answer of the documented shape or an {@link ApiCallError}.
 */
export class OrchClient {
  readonly #context: Context;
  readonly #answerLimit: number;
  readonly #timeoutMs: number;

  constructor(context: Context, opts: OrchClientOptions = {}) {
    this.#context = context;
    this.#answerLimit = opts.answerLimitBytes ?? ANSWER_LIMIT_BYTES;
    this.#timeoutMs = opts.timeoutMs ?? CALL_TIMEOUT_MS;
  }

  /**
   * One request, its answer read in full within the time limit and checked with `schema` (the
   * `@orch/protocol` schema of the route's answer; {@link NoContent} for a 204), within
   * `opts.timeoutMs`, with `opts.headers` besides the credentials.
   *
   * @example
   * const { hosts } = await api.call(HostList, 'GET', '/v1/hosts');
   */
  async call<S extends z.ZodType>(
    schema: S,
    method: string,
    path: string,
    body?: unknown,
    opts: CallOptions = {},
  ): Promise<z.output<S>> {
    const timeoutMs = opts.timeoutMs ?? this.#timeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    const res = await this.send(method, path, {
      body,
      signal,
      timeoutMs,
      ...(opts.headers ? { headers: opts.headers } : {}),
    });
    const text = new TextDecoder().decode(await this.readAll(res, timeoutMs));
    if (!res.ok) throw apiErrorFromResponse(res.status, text);
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw this.badAnswer(method, path, 'not JSON');
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw this.badAnswer(method, path, describeIssues(parsed.error.issues));
    return parsed.data;
  }

  /**
   * A `GET` whose successful answer is read by the caller as it arrives (a log, a stream); `signal`
   * bounds it (no time limit of its own); `headers` are sent besides the credentials (`accept`
   * defaults to any type). Failures are {@link ApiCallError}s: an error answer is read with the
   * answer limit ({@link readAll}).
   */
  async open(path: string, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
    const res = await this.send('GET', path, {
      accept: '*/*',
      headers,
      ...(signal ? { signal } : {}),
    });
    if (!res.ok) throw apiErrorFromResponse(res.status, new TextDecoder().decode(await this.readAll(res)));
    return res;
  }

  /**
   * The whole body of `res`, at most the answer limit: a larger one is cancelled as soon as it
   * passes the limit (`bad_answer`); a body cut short or too slow is a `transport` error.
   */
  async readAll(res: Response, timeoutMs = this.#timeoutMs): Promise<Uint8Array> {
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > this.#answerLimit) {
      await res.body?.cancel().catch(() => undefined);
      throw this.tooLarge();
    }
    if (!res.body) return new Uint8Array();
    const reader = res.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (err) {
        throw this.transport(err, timeoutMs);
      }
      if (next.done) break;
      size += next.value.byteLength;
      if (size > this.#answerLimit) {
        await reader.cancel().catch(() => undefined);
        throw this.tooLarge();
      }
      chunks.push(next.value);
    }
    return Buffer.concat(chunks, size);
  }

  private async send(
    method: string,
    path: string,
    opts: {
      body?: unknown;
      signal?: AbortSignal;
      timeoutMs?: number;
      accept?: string;
      headers?: Record<string, string>;
    },
  ): Promise<Response> {
    const headers: Record<string, string> = { accept: opts.accept ?? 'application/json', ...opts.headers };
    if (this.#context.token !== undefined) {
      const problem = tokenProblem(this.#context.token);
      if (problem) throw new CliError(`orch: the token of this context cannot be sent: it ${problem}`);
      headers.authorization = `Bearer ${this.#context.token}`;
    }
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetchWithin(
        `${this.#context.url}${path}`,
        {
          method,
          headers,
          redirect: 'manual',
          ...(opts.signal ? { signal: opts.signal } : {}),
          ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        },
        opts.timeoutMs ?? 0,
      );
    } catch (err) {
      throw this.transport(err, opts.timeoutMs);
    }
  }

  private transport(err: unknown, timeoutMs = this.#timeoutMs): ApiCallError {
    return new ApiCallError(
      undefined,
      `cannot reach the orchestrator at ${this.#context.url}: ${transportProblem(err, timeoutMs)}`,
    );
  }

  private tooLarge(): ApiCallError {
    const mib = this.#answerLimit / 2 ** 20;
    const limit = Number.isInteger(mib) ? `${mib} MiB` : `${this.#answerLimit} bytes`;
    return new ApiCallError(
      undefined,
      `the orchestrator's answer is larger than ${limit}; it was not read further`,
      'bad_answer',
    );
  }

  private badAnswer(method: string, path: string, problem: string): ApiCallError {
    return new ApiCallError(
      undefined,
      `malformed answer from the orchestrator at ${this.#context.url} to ${method} ${path.split('?')[0]}: ${problem}`,
      'bad_answer',
    );
  }
}
