import {
  HEADERS,
  IDEMPOTENT_MARK,
  mayRetry,
  type ProcedureName,
  type ProcedureOutput,
} from '@board/protocol';
import { BoardError, errResult, okResult, type Result } from './errors.js';
import type { RetryOptions } from './types.js';

/** Resolved connection settings shared by every board client of one `connect()`. */
export interface TransportConfig {
  url: string;
  token: string | undefined;
  timeoutMs: number;
  retry: RetryOptions;
  fetch: typeof fetch;
}

/** A successful RPC: the envelope's value and who served it. */
export interface RpcAnswer<T> {
  value: T;
  /** `x-data-served-by` (router), else undefined (the caller resolves the node id). */
  servedBy: string | undefined;
}

/**
 * One request attempt's outcome. Transport failures are retryable (when the procedure allows);
 * an envelope (ok or error) is final.
 */
type Attempt<T> = { final: Result<RpcAnswer<T>> } | { transport: BoardError };

/** Request headers for a board: content type, board, bearer token. */
export function baseHeaders(config: TransportConfig, board: string): Record<string, string> {
  const headers: Record<string, string> = { [HEADERS.board]: board };
  if (config.token !== undefined) headers.authorization = `Bearer ${config.token}`;
  return headers;
}

/**
 * May this request be retried after a transport failure? `@board/protocol`'s `mayRetry` (the rule
 * the router uses too): reads always; mutations only with an `idempotencyKey` in the body.
 */
export function isRetryable(procedure: ProcedureName, body: Record<string, unknown>): boolean {
  return mayRetry(procedure, typeof body.idempotencyKey === 'string');
}

/** Sleeps `ms`, or less when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * `POST /rpc/<procedure>` with the deadline, retries and headers of the contract. Never throws:
 * every failure is a {@link BoardError} in the Result (the one place wire errors become typed).
 */
export async function callRpc<P extends ProcedureName>(
  config: TransportConfig,
  board: string,
  procedure: P,
  body: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<Result<RpcAnswer<ProcedureOutput<P>>>> {
  type T = ProcedureOutput<P>;
  const headers = baseHeaders(config, board);
  headers['content-type'] = 'application/json';
  // A router may hedge or fail over a request marked idempotent without parsing the body.
  if (typeof body.idempotencyKey === 'string') headers[HEADERS.idempotent] = IDEMPOTENT_MARK;
  const payload = JSON.stringify(body);
  const retries = isRetryable(procedure, body) ? Math.max(0, config.retry.times) : 0;
  let last: BoardError | undefined;
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (attempt > 0) await sleep(config.retry.delayMs, signal);
    if (signal?.aborted) return errResult(new BoardError('Aborted', 'the request was aborted'));
    const outcome = await attemptOnce<T>(config, procedure, headers, payload, signal);
    if ('final' in outcome) return outcome.final;
    last = outcome.transport;
    if (last._tag === 'Aborted') break;
  }
  return errResult(last ?? new BoardError('TransportFailed', 'no attempt was made'));
}

async function attemptOnce<T>(
  config: TransportConfig,
  procedure: ProcedureName,
  headers: Record<string, string>,
  payload: string,
  signal: AbortSignal | undefined,
): Promise<Attempt<T>> {
  const deadline = AbortSignal.timeout(config.timeoutMs);
  const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
  let res: Response;
  let text: string;
  try {
    res = await config.fetch(`${config.url}/rpc/${procedure}`, {
      method: 'POST',
      headers,
      body: payload,
      signal: combined,
    });
    text = await res.text();
  } catch (err) {
    if (signal?.aborted)
      return { transport: new BoardError('Aborted', 'the request was aborted', { cause: err }) };
    if (deadline.aborted) {
      return {
        transport: new BoardError(
          'TransportTimeout',
          `no answer from ${procedure} within ${config.timeoutMs} ms`,
          {
            cause: err,
          },
        ),
      };
    }
    const reason = err instanceof Error ? err.message : String(err);
    return { transport: new BoardError('TransportFailed', `${procedure}: ${reason}`, { cause: err }) };
  }
  return fromResponse<T>(res, text);
}

/** Maps an HTTP answer to a Result: the one place envelopes become typed errors. */
function fromResponse<T>(res: Response, text: string): Attempt<T> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    const message = `HTTP ${res.status} without a JSON envelope: ${text.slice(0, 200)}`;
    // A proxy or router answering 5xx without an envelope is a transport failure.
    if (res.status >= 500)
      return { transport: new BoardError('TransportFailed', message, { status: res.status }) };
    return { final: errResult(new BoardError('BadResponse', message, { status: res.status })) };
  }
  const servedBy = res.headers.get(HEADERS.servedBy) ?? undefined;
  if (isObject(body) && body.status === 'ok' && 'value' in body) {
    return { final: okResult({ value: body.value as T, servedBy }) };
  }
  if (isObject(body) && body.status === 'error' && isObject(body.error)) {
    const tag = typeof body.error._tag === 'string' ? body.error._tag : 'Internal';
    const message = typeof body.error.message === 'string' ? body.error.message : '';
    return { final: errResult(new BoardError(tag as BoardError['_tag'], message, { status: res.status })) };
  }
  const message = `HTTP ${res.status}: not a wire envelope: ${text.slice(0, 200)}`;
  if (res.status >= 500)
    return { transport: new BoardError('TransportFailed', message, { status: res.status }) };
  return { final: errResult(new BoardError('BadResponse', message, { status: res.status })) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}
