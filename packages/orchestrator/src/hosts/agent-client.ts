import { AGENT_PATHS, AgentInfo } from '@orch/protocol';

/** Why an agent call failed. `message` is safe to show: it never contains the token. */
export class AgentError extends Error {
  override readonly name = 'AgentError';
  constructor(
    readonly kind: 'redirect' | 'unauthorized' | 'unreachable' | 'bad_response',
    message: string,
  ) {
    super(message);
  }
}

const MAX_INFO_BYTES = 1 << 20;

/**
 * Dials an agent's info endpoint. Redirects are never followed (a 3xx is an error), the answer is
 * capped at 1 MiB and validated, and the whole call is bounded by `timeoutMs`.
 */
export async function fetchAgentInfo(baseUrl: string, token: string, timeoutMs = 5000): Promise<AgentInfo> {
  const url = `${baseUrl}${AGENT_PATHS.info}`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${timeoutMs} ms`
        : (cause?.code ?? cause?.message ?? (err as Error).message);
    throw new AgentError('unreachable', `could not reach the agent at ${baseUrl}: ${why}`);
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel();
    throw new AgentError(
      'redirect',
      `the agent at ${baseUrl} answered http ${res.status} (a redirect); redirects from agents are never followed`,
    );
  }
  if (res.status === 401 || res.status === 403) {
    await res.body?.cancel();
    throw new AgentError(
      'unauthorized',
      `the agent at ${baseUrl} refused the agent token: http ${res.status}`,
    );
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new AgentError('bad_response', `the agent at ${baseUrl} answered http ${res.status}`);
  }
  const text = await readLimited(res, MAX_INFO_BYTES);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AgentError('bad_response', `the agent at ${baseUrl} did not answer JSON`);
  }
  const info = AgentInfo.safeParse(json);
  if (!info.success) {
    const issue = info.error.issues[0];
    throw new AgentError(
      'bad_response',
      `the agent at ${baseUrl} sent malformed info: ${issue?.path.join('.')}: ${issue?.message}`,
    );
  }
  return info.data;
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
