import type { Context } from 'hono';
import type { z } from 'zod';
import type { Principal } from '../auth/authenticator.js';

/** Who may call a route: anyone (no auth), any authenticated caller, or the master token only. */
export type Access = 'public' | 'authenticated' | 'master';

/** What a handler answers: a status, a JSON body (omitted for 204) and extra headers. */
export interface Reply {
  readonly status: 200 | 201 | 204;
  readonly body?: unknown;
  /** A text answer instead of JSON (`GET /metrics`), sent with `headers`' content type. */
  readonly text?: string;
  /** A response made by the handler (a stream: `GET /v1/events`), sent as it is. */
  readonly raw?: Response;
  readonly headers?: Readonly<Record<string, string>>;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteSpec<
  P extends z.ZodType | undefined,
  Q extends z.ZodType | undefined,
  B extends z.ZodType | undefined,
> {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** OpenAPI form, e.g. `/v1/hosts/{id}`. */
  readonly path: string;
  readonly access: Access;
  readonly summary: string;
  /** OpenAPI `operationId`; derived from the method and path when absent (see openapi.ts). */
  readonly operationId?: string;
  /** Error statuses the route can answer beyond those derived from its shape (see openapi.ts). */
  readonly errors?: readonly number[];
  /** Served as a WebSocket upgrade (documented as `101`, and `426` without one). */
  readonly websocket?: boolean;
  readonly tag: string;
  readonly params?: P;
  /**
   * Optional request headers the route reads (documented in OpenAPI as header parameters); the
   * handler validates them and answers `400` naming the header.
   */
  readonly headers?: Readonly<Record<string, { readonly schema: z.ZodType; readonly description: string }>>;
  readonly query?: Q;
  readonly body?: B;
  /**
   * When set, the master token is required (as for `access: 'master'`) if this says so for the raw
   * query (`?action=exec`). Checked right after authentication, before the path, query and body are
   * validated, so an API key gets its 403 whatever else is wrong with the request.
   */
  readonly masterWhen?: (query: Readonly<Record<string, string>>) => boolean;
  /** When set, the body is read and checked only if this says so for the query (an `?action=` with no body). */
  // biome-ignore lint/suspicious/noExplicitAny: the query's type is the route's own
  readonly bodyWhen?: (query: any) => boolean;
  /** Success status and schema (documented in OpenAPI); errors are the common envelope. */
  readonly success: {
    readonly status: 200 | 201 | 204;
    readonly schema?: z.ZodType;
    /** A non-JSON answer's media type (documented as a string body): `text/event-stream`, `text/plain`. */
    readonly mediaType?: string;
    readonly description: string;
  };
  readonly handler: (input: {
    readonly params: Out<P>;
    readonly query: Out<Q>;
    readonly body: Out<B>;
    readonly principal: Principal | undefined;
    readonly c: Context;
  }) => Promise<Reply>;
}

/** A route with its types erased, for the route table. */
// biome-ignore lint/suspicious/noExplicitAny: the table holds routes of every input type; each is checked where it is defined
export type AnyRoute = RouteSpec<any, any, any>;

/** Declares a route; the handler's input types follow from the schemas. */
export function route<
  P extends z.ZodType | undefined = undefined,
  Q extends z.ZodType | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(spec: RouteSpec<P, Q, B>): AnyRoute {
  return spec;
}
