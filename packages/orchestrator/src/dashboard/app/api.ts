/** The API's error, with its code and message (shown to the user as is). */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * Calls the orchestrator API with the session cookie. State-changing requests are always JSON
 * (the server refuses anything else from a browser session: cross-site protection).
 */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers:
      method === 'GET'
        ? { accept: 'application/json' }
        : { accept: 'application/json', 'content-type': 'application/json' },
    ...(method === 'GET' ? {} : { body: JSON.stringify(body ?? {}) }),
  });
  const text = await res.text();
  const json = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) {
    const e = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (res.status === 401 && location.pathname !== '/login') location.assign('/login');
    throw new ApiError(e?.code ?? 'internal', e?.message ?? `http ${res.status}`, res.status);
  }
  return json as T;
}
