import { AGENT_PATHS, AgentInfo } from '@orch/protocol';
import type { z } from 'zod';

/**
 * Why an agent call failed. `message` is safe to show: it never contains the token.
 * - `unreachable`: no answer (refused, reset, timeout)
 * - `unauthorized`: the agent refused the token (http 401/403)
 * - `redirect`: the agent answered 3xx (never followed)
 * - `not_found`: http 404 (no such VM or snapshot on the agent)
 * - `rejected`: another 4xx; the agent's own message is kept
 * - `bad_response`: 5xx, not JSON, or not the expected shape
 */
export class AgentError extends Error {
  override readonly name = 'AgentError';
  constructor(
    readonly kind: 'redirect' | 'unauthorized' | 'unreachable' | 'not_found' | 'rejected' | 'bad_response',
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

const MAX_ANSWER_BYTES = 64 << 20;

/** Calls one host agent: bearer token, no redirects, bounded answer size and time. */
export class AgentClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    private readonly timeoutMs = 30_000,
  ) {}

  info(): Promise<AgentInfo> {
    return this.json('GET', AGENT_PATHS.info, undefined, AgentInfo, 5000);
  }

  /** A JSON call; `schema` validates the answer (omit it for 204 answers). */
  async json<S extends z.ZodType>(
    method: string,
    path: string,
    body?: unknown,
    schema?: S,
    timeoutMs = this.timeoutMs,
  ): Promise<z.output<S>> {
    const res = await this.raw(method, path, body, timeoutMs);
    const text = await readLimited(res, MAX_ANSWER_BYTES);
    if (!schema) return undefined as z.output<S>;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AgentError(
        'bad_response',
        `the agent at ${this.baseUrl} did not answer JSON (${method} ${path})`,
      );
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new AgentError(
        'bad_response',
        `the agent at ${this.baseUrl} sent a malformed answer: ${issue?.path.join('.')}: ${issue?.message}`,
      );
    }
    return parsed.data;
  }

  /** The response of a successful call (2xx), for callers that stream it; failures are AgentErrors. */
  async raw(method: string, path: string, body?: unknown, timeoutMs = this.timeoutMs): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why =
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms`
          : (cause?.code ?? cause?.message ?? (err as Error).message);
      throw new AgentError('unreachable', `could not reach the agent at ${this.baseUrl}: ${why}`);
    }
    if (res.ok) return res;
    const text = await readLimited(res, 64 * 1024).catch(() => '');
    const where = `the agent at ${this.baseUrl}`;
    if (res.status >= 300 && res.status < 400) {
      throw new AgentError(
        'redirect',
        `${where} answered http ${res.status} (a redirect); redirects from agents are never followed`,
        res.status,
      );
    }
    if (res.status === 401 || res.status === 403) {
      throw new AgentError(
        'unauthorized',
        `${where} refused the agent token: http ${res.status}`,
        res.status,
      );
    }
    const message = agentMessage(text);
    if (res.status === 404)
      throw new AgentError('not_found', `${where}: http 404${message ? `: ${message}` : ''}`, 404);
    if (res.status < 500)
      throw new AgentError(
        'rejected',
        `${where} refused the request: http ${res.status}${message ? `: ${message}` : ''}`,
        res.status,
      );
    throw new AgentError(
      'bad_response',
      `${where} failed: http ${res.status}${message ? `: ${message}` : ''}`,
      res.status,
    );
  }
}

/** Dials an agent's info endpoint (registration and health checks). */
export function fetchAgentInfo(baseUrl: string, token: string): Promise<AgentInfo> {
  return new AgentClient(baseUrl, token).info();
}

function agentMessage(text: string): string | undefined {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    return typeof m === 'string' ? m.slice(0, 500) : undefined;
  } catch {
    return undefined;
  }
}

async function readLimited(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new AgentError('bad_response', `the agent's answer is larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
