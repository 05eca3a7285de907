import {
  AGENT_PATHS,
  AgentInfo,
  checkAgentUrl,
  cleanText,
  type ErrorDetails,
  errorFromBody,
  OrchError,
} from '@orch/protocol';
import { currentRequestId, REQUEST_ID_HEADER } from '@support/server';
import { Agent as Dispatcher, fetch as undiciFetch } from 'undici';
import type { z } from 'zod';
import type { AgentCallObserver } from '../metrics.js';

/**
 * Node's `fetch` gives up on an answer whose head takes longer than 300 s (undici's
 * `headersTimeout`), whatever the call's own deadline; and an exec, a pause or a transfer may take
 * longer (an `orch exec --timeout 600`). A call allowed that long goes through a dispatcher without
 * undici's limits: its deadline is the call's signal, as for every other call.
 */
export const FETCH_HEADERS_LIMIT_MS = 300_000;
const unlimited = new Dispatcher({ headersTimeout: 0, bodyTimeout: 0 });

/** `fetch`, through {@link unlimited} when the call may outlast undici's own limits. */
function fetchWithin(url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
  if (timeoutMs < FETCH_HEADERS_LIMIT_MS) return fetch(url, init);
  // undici's own fetch and its Response are the same classes Node's fetch is built from.
  return undiciFetch(url, { ...(init as object), dispatcher: unlimited }) as unknown as Promise<Response>;
}

/** How an agent call failed, for the health monitor and registration. */
export type AgentFailure =
  /** no answer, or no complete answer in time (refused, reset, timeout, a slow drip) */
  | 'unreachable'
  /** the agent refused the token (http 401/403) */
  | 'unauthorized'
  /** the agent answered 3xx (never followed) */
  | 'redirect'
  /** http 404: no such VM or snapshot on the agent */
  | 'not_found'
  /** another 4xx: the agent's own code, message and details are kept */
  | 'rejected'
  /** 5xx, not JSON, too large, or not the expected shape */
  | 'bad_response';

/**
 * A failed agent call, as the error orchd answers with. It keeps the agent's own `code` and
 * `details` where the agent sent an error envelope (a `409 conflict` stays a conflict, a
 * `details.reason: disk_full` reaches the caller); what is the orchestrator's problem rather than
 * the caller's (an unreachable, refusing or broken agent, or an agent `internal`) is `503
 * unavailable` with `details.agent_error`. `message` never contains the token.
 */
export class AgentCallError extends OrchError {
  override readonly name = 'AgentCallError';
  constructor(
    readonly kind: AgentFailure,
    code: OrchError['code'],
    message: string,
    details?: ErrorDetails,
    /** The agent's HTTP status, when it answered. */
    readonly agentStatus?: number,
  ) {
    super(code, message, details);
  }
}

/** Whether an agent call failed with the agent's 404: it has no such VM or snapshot. */
export function isAgentNotFound(err: unknown): boolean {
  return err instanceof AgentCallError && err.kind === 'not_found';
}

/** Largest agent answer read by default (the README's 1 MiB); exec results are allowed more. */
export const MAX_ANSWER_BYTES = 1 << 20;
/** Largest error answer read from an agent. */
const MAX_ERROR_BYTES = 64 * 1024;

/** Options of one JSON call. */
export interface CallOptions {
  readonly timeoutMs?: number;
  /** Largest answer accepted (default {@link MAX_ANSWER_BYTES}). */
  readonly maxBytes?: number;
}

/** Calls one host agent: bearer token, no redirects, bounded answer size and time (the whole answer). */
export class AgentClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    private readonly timeoutMs = 30_000,
    /** Told of every JSON call's outcome and duration (metrics). */
    private readonly observe?: AgentCallObserver,
  ) {}

  info(): Promise<AgentInfo> {
    return this.json('GET', AGENT_PATHS.info, undefined, AgentInfo, { timeoutMs: 5000 });
  }

  /** A JSON call; `schema` validates the answer (omit it for 204 answers). */
  async json<S extends z.ZodType>(
    method: string,
    path: string,
    body?: unknown,
    schema?: S,
    opts: CallOptions = {},
  ): Promise<z.output<S>> {
    if (!this.observe) return this.call(method, path, body, schema, opts);
    const started = performance.now();
    let outcome = 'ok';
    try {
      return await this.call(method, path, body, schema, opts);
    } catch (err) {
      outcome = err instanceof AgentCallError ? err.kind : 'error';
      throw err;
    } finally {
      this.observe(outcome, (performance.now() - started) / 1000);
    }
  }

  private async call<S extends z.ZodType>(
    method: string,
    path: string,
    body: unknown,
    schema: S | undefined,
    opts: CallOptions,
  ): Promise<z.output<S>> {
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    const res = await this.raw(method, path, body, timeoutMs, signal);
    const text = (await this.read(res, opts.maxBytes ?? MAX_ANSWER_BYTES, timeoutMs)).toString('utf8');
    if (!schema) return undefined as z.output<S>;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw this.badResponse(`did not answer JSON (${method} ${path})`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw this.badResponse(
        `sent a malformed answer: ${cleanText(`${issue?.path.join('.')}: ${issue?.message}`).slice(0, 300)}`,
      );
    }
    return parsed.data;
  }

  /** `DELETE` of a VM or snapshot: one the agent does not have (404) counts as deleted. */
  async deleteIfPresent(path: string): Promise<void> {
    try {
      await this.json('DELETE', path);
    } catch (err) {
      if (!isAgentNotFound(err)) throw err;
    }
  }

  /** A `GET` whose answer is raw bytes (at most `maxBytes`), with the answer's headers. */
  async bytes(path: string, maxBytes: number): Promise<{ bytes: Buffer; headers: Headers }> {
    const res = await this.raw('GET', path);
    return { bytes: await this.read(res, maxBytes, this.timeoutMs), headers: res.headers };
  }

  /**
   * The response of a successful call (2xx), for callers that stream it; failures are
   * {@link AgentCallError}s. `signal` (default: a timeout of `timeoutMs`) also bounds reading the body.
   */
  async raw(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = this.timeoutMs,
    signal: AbortSignal = AbortSignal.timeout(timeoutMs),
  ): Promise<Response> {
    let res: Response;
    const requestId = currentRequestId();
    requireDialable(this.baseUrl);
    try {
      res = await fetchWithin(
        `${this.baseUrl}${path}`,
        {
          method,
          headers: {
            authorization: `Bearer ${this.token}`,
            accept: 'application/json',
            // The request being served, so one create can be followed in orchd's and the agent's logs.
            ...(requestId ? { [REQUEST_ID_HEADER]: requestId } : {}),
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          redirect: 'manual',
          signal,
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        },
        timeoutMs,
      );
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why =
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms`
          : (cause?.code ?? cause?.message ?? (err as Error).message);
      throw this.unreachable(`could not reach the agent at ${this.baseUrl}: ${why}`);
    }
    if (res.ok) return res;
    const text = await this.read(res, MAX_ERROR_BYTES, timeoutMs)
      .then((b) => b.toString('utf8'))
      .catch(() => '');
    throw this.failure(res.status, text);
  }

  /** The error for a non-2xx answer: the agent's code and details kept where that is the caller's business. */
  private failure(status: number, text: string): AgentCallError {
    const where = `the agent at ${this.baseUrl}`;
    if (status >= 300 && status < 400) {
      return new AgentCallError(
        'redirect',
        'unavailable',
        `${where} answered http ${status} (a redirect); redirects from agents are never followed`,
        { agent_error: 'redirect', agent_status: status },
        status,
      );
    }
    if (status === 401 || status === 403) {
      return new AgentCallError(
        'unauthorized',
        'unavailable',
        `${where} refused the agent token: http ${status}`,
        { agent_error: 'unauthorized', agent_status: status },
        status,
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const agent = errorFromBody(status, body);
    const said = cleanText(agent.message.slice(0, 500));
    if (status === 404 && agent.code === 'not_found')
      return new AgentCallError('not_found', 'not_found', `${where}: ${said}`, agent.details, status);
    // 4xx with the agent's own code (conflict, invalid_argument, ...): the caller's to fix.
    const kept = ['invalid_argument', 'conflict', 'not_found', 'unimplemented'].includes(agent.code);
    if (status < 500 && kept) {
      return new AgentCallError(
        'rejected',
        agent.code,
        `${where} refused the request: http ${status}: ${said}`,
        agent.details,
        status,
      );
    }
    // 5xx, or a code that is about orchd's own call (route_not_found, unauthorized): unavailable,
    // with the agent's details (for example `reason: disk_full`) and its code.
    return new AgentCallError(
      'bad_response',
      'unavailable',
      `${where} failed: http ${status}: ${said}`,
      { ...agent.details, agent_error: agent.code, agent_status: status },
      status,
    );
  }

  private unreachable(message: string): AgentCallError {
    return new AgentCallError('unreachable', 'unavailable', message, { agent_error: 'unreachable' });
  }

  private badResponse(why: string): AgentCallError {
    return new AgentCallError('bad_response', 'unavailable', `the agent at ${this.baseUrl} ${why}`, {
      agent_error: 'bad_response',
    });
  }

  /**
   * Reads a whole answer, at most `max` bytes, within the call's time limit: an agent that drips
   * its answer is unreachable once the limit passes, one that sends too much is a bad response.
   */
  private async read(res: Response, max: number, timeoutMs: number): Promise<Buffer> {
    const reader = res.body?.getReader();
    if (!reader) return Buffer.alloc(0);
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > max) {
          await reader.cancel().catch(() => undefined);
          throw this.badResponse(`sent an answer larger than ${max} bytes`);
        }
        chunks.push(value);
      }
    } catch (err) {
      if (err instanceof AgentCallError) throw err;
      await reader.cancel().catch(() => undefined);
      const name = (err as Error).name;
      throw this.unreachable(
        name === 'TimeoutError' || name === 'AbortError'
          ? `the agent at ${this.baseUrl} sent no complete answer within ${timeoutMs} ms`
          : `the agent at ${this.baseUrl} broke off its answer: ${cleanText((err as Error).message)}`,
      );
    }
    return Buffer.concat(chunks);
  }
}

/**
 * Refuses, before any dial, a stored agent URL that today's rules refuse (`checkAgentUrl`): a host
 * registered before a rule existed (a link-local address) is never dialled, and every call to it
 * fails as `unavailable` saying why. Called by every path that dials an agent.
 */
export function requireDialable(agentUrl: string): void {
  const checked = checkAgentUrl(agentUrl);
  if (!checked.ok)
    throw new AgentCallError('unreachable', 'unavailable', `not dialled: ${checked.reason}`, {
      agent_error: 'refused_url',
    });
}

/** Dials an agent's info endpoint (registration and health checks). */
export function fetchAgentInfo(baseUrl: string, token: string): Promise<AgentInfo> {
  return new AgentClient(baseUrl, token).info();
}
