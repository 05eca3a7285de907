import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

/** The header a request id travels in, both ways (request and answer), between our servers too. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** What a caller's request id may be: 1-128 of `A-Z a-z 0-9 . _ : -` (no spaces, quotes or controls). */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

const context = new AsyncLocalStorage<{ readonly requestId: string }>();

/** A fresh request id: `req_` and 16 random bytes, base64url. */
export function newRequestId(): string {
  return `req_${randomBytes(16).toString('base64url')}`;
}

/**
 * The id of a request: the caller's `x-request-id` when it matches {@link REQUEST_ID_PATTERN} (so
 * a client, a proxy or orchd calling an agent can correlate), else a fresh one. An invalid value is
 * replaced, never echoed or logged (it could forge log lines).
 */
export function requestIdFrom(header: string | null | undefined): string {
  return header && REQUEST_ID_PATTERN.test(header) ? header : newRequestId();
}

/**
 * Runs `fn` with `requestId` as the current request's id: every log line written by a logger of
 * {@link createLogger} under it (including work it starts and leaves running) carries
 * `request_id`, and calls to agents forward it.
 */
export function withRequestId<T>(requestId: string, fn: () => T): T {
  return context.run({ requestId }, fn);
}

/** The current request's id, or undefined outside a request. */
export function currentRequestId(): string | undefined {
  return context.getStore()?.requestId;
}

/** The exchange the request-id middleware sees: structurally a Hono `Context`. */
export interface RequestIdExchange {
  readonly req: { readonly method: string; header(name: string): string | undefined };
  readonly res: { readonly status: number };
  header(name: string, value: string): void;
}

/**
 * A middleware (Hono's shape) giving every request its id ({@link requestIdFrom}), serving it
 * under {@link withRequestId}, answering it in `x-request-id`, and logging one line per request
 * (`method`, `route` template, `status`, `ms`): at `info` for requests that change something, at
 * `debug` for reads (the dashboard polls).
 */
export function requestIdMiddleware<C extends RequestIdExchange>(
  log: { info(o: object, msg: string): void; debug(o: object, msg: string): void },
  routeOf: (c: C) => string | undefined,
): (c: C, next: () => Promise<void>) => Promise<void> {
  return async (c, next) => {
    const requestId = requestIdFrom(c.req.header(REQUEST_ID_HEADER));
    const started = performance.now();
    await withRequestId(requestId, async () => {
      try {
        await next();
      } finally {
        try {
          c.header(REQUEST_ID_HEADER, requestId);
        } catch {
          // an answer with immutable headers (a relayed fetch Response) goes without it
        }
        const method = c.req.method;
        const line = {
          method,
          route: routeOf(c) ?? 'unmatched',
          status: c.res.status,
          ms: Math.round(performance.now() - started),
        };
        if (method === 'GET' || method === 'HEAD') log.debug(line, 'request');
        else log.info(line, 'request');
      }
    });
  };
}
