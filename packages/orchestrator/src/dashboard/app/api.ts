import { type ErrorCode, type ErrorDetails, errorFromBody, OrchError } from '@orch/protocol';

/**
 * The API's error as the dashboard shows it (code and message, as they are): the protocol's error
 * class, constructed with its status.
 */
export class ApiError extends OrchError {
  constructor(code: ErrorCode, message: string, status: number, details?: ErrorDetails) {
    super(code, message, details, status);
  }
}

/**
 * Calls the orchestrator API with the session cookie. State-changing requests are always JSON
 * (the server refuses anything else from a browser session: cross-site protection). An error
 * answer becomes an {@link ApiError} through `errorFromBody`: the one place the dashboard maps
 * answers back to errors.
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
  let json: unknown;
  try {
    json = text ? (JSON.parse(text) as unknown) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    if (res.status === 401 && location.pathname !== '/login') location.assign('/login');
    const e = errorFromBody(res.status, json);
    throw new ApiError(e.code, e.message, e.status, e.details);
  }
  return json as T;
}
