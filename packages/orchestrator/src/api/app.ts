import { issuesDetails, OrchError, parseJsonBody, SESSION_COOKIE } from '@orch/protocol';
import { type HttpMetrics, requestIdMiddleware } from '@support/server';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie } from 'hono/cookie';
import { routePath } from 'hono/route';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { type Authenticator, type Principal, requireMaster } from '../auth/authenticator.js';
import type { CidrAllowlist } from '../auth/cidr-allowlist.js';
import { crossSiteRefusal } from '../auth/same-origin.js';
import { clientAddress } from './client-address.js';
import { toOrchError } from './errors.js';
import type { AnyRoute } from './route.js';

/** Largest request body accepted: 1 MiB (the spec leaves request size limits open). */
export const MAX_BODY_BYTES = 1 << 20;

/** Paths where every method, routed or not, needs the master token (orchestrator.md, "Endpoints"). */
const MASTER_ONLY_TREES = ['/v1/api-keys'] as const;

export interface AppDeps {
  readonly auth: Authenticator;
  readonly allowlist: CidrAllowlist;
  readonly logger: Logger;
  /** HTTP metrics by route template (registered first, so refusals are counted too). */
  readonly http?: HttpMetrics;
}

/**
 * Builds the HTTP app from the route table: CIDR allowlist, body limit, authentication and access,
 * input validation with the route's zod schemas, and the single place where errors become the
 * `{ error: { code, message, details? } }` envelope.
 */
export function buildApp(deps: AppDeps, routes: readonly AnyRoute[], extend?: (app: Hono) => void): Hono {
  const app = new Hono();

  const template = (c: Context) => routePath(c, -1);
  // Request ids first: everything after (refusals included) is logged under the request's id.
  app.use('*', requestIdMiddleware(deps.logger, template));
  if (deps.http) app.use('*', deps.http.middleware(template));
  app.use('*', async (c, next) => {
    const address = clientAddress(c);
    if (!deps.allowlist.allows(address)) {
      throw new OrchError('forbidden', "your address is not in the orchestrator's allowed client networks", {
        address: address ?? null,
      });
    }
    await next();
  });
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new OrchError(
          'invalid_argument',
          `the request body is larger than ${MAX_BODY_BYTES} bytes`,
          { limit: MAX_BODY_BYTES },
          413,
          // The rest of the body is not read, so this connection cannot carry another request.
          { connection: 'close' },
        );
      },
    }),
  );

  app.use('*', async (c, next) => {
    const refusal = crossSiteRefusal({
      method: c.req.method,
      url: c.req.url,
      header: (name) => c.req.header(name),
      hasSessionCookie: getCookie(c, SESSION_COOKIE) !== undefined,
    });
    if (refusal) throw new OrchError('unauthorized', refusal, undefined, 403);
    await next();
  });

  for (const r of routes) {
    app.on(r.method, r.path.replace(/\{(\w+)\}/g, ':$1'), async (c) => {
      let principal: Principal | undefined;
      if (r.access !== 'public') {
        principal = await deps.auth.authenticate({
          authorization: c.req.header('authorization'),
          sessionCookie: getCookie(c, SESSION_COOKIE),
        });
        if (r.access === 'master' || r.masterWhen?.(c.req.query())) requireMaster(principal);
      }
      const params = r.params ? parse(r.params, c.req.param(), 'path') : undefined;
      const query = r.query ? parse(r.query, c.req.query(), 'query') : undefined;
      const body =
        r.body && (r.bodyWhen?.(query) ?? true) ? parse(r.body, await readJson(c), 'body') : undefined;
      const reply = await r.handler({ params, query, body, principal, c });
      for (const [k, v] of Object.entries(reply.headers ?? {})) c.header(k, v);
      if (reply.raw) return reply.raw;
      if (reply.text !== undefined) return c.body(reply.text, reply.status as 200);
      return reply.status === 204 ? c.body(null, 204) : c.json(reply.body as object, reply.status);
    });
  }

  // `/v1/api-keys` is master-only for every method (orchestrator.md, "Endpoints"): a method or
  // sub-path with no route is refused to an API key like the routes are (403), and only then is
  // it `route_not_found` for whoever may call the routes there.
  for (const path of MASTER_ONLY_TREES) {
    app.all(`${path}/*`, async (c) => {
      requireMaster(
        await deps.auth.authenticate({
          authorization: c.req.header('authorization'),
          sessionCookie: getCookie(c, SESSION_COOKIE),
        }),
      );
      return c.notFound();
    });
  }

  extend?.(app);

  app.notFound((c) => {
    const err = new OrchError(
      'route_not_found',
      `no route for ${c.req.method} ${new URL(c.req.url).pathname}`,
    );
    return c.json(err.toBody(), 404);
  });

  app.onError((err, c) => {
    const apiError = toOrchError(err);
    if (apiError.code === 'internal') deps.logger.error({ err, path: c.req.path }, 'unexpected error');
    else if (apiError.code === 'unavailable')
      deps.logger.warn({ path: c.req.path, err: err.message }, 'unavailable');
    for (const [k, v] of Object.entries(apiError.headers)) c.header(k, v);
    return c.json(apiError.toBody(), apiError.status as 400);
  });

  return app;
}

async function readJson(c: Context): Promise<unknown> {
  return parseJsonBody(await c.req.text());
}

/**
 * Validates one part of a request with the route's schema. A path parameter outside its documented
 * pattern names nothing that can exist: `404 not_found` saying the pattern. A bad query or body is
 * `400 invalid_argument` naming the first field; `details.issues` lists at most the first 20
 * issues, with `issue_count`, so a huge invalid body gets a small answer.
 */
function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: 'path' | 'query' | 'body',
): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = issuesDetails(result.error.issues, where);
  const first = details.issues[0]!;
  if (where === 'path') {
    const given = (value as Record<string, unknown>)[first.field];
    const shown = typeof given === 'string' ? ` ${JSON.stringify(given.slice(0, 64))}` : '';
    throw new OrchError('not_found', `not found: ${first.field}${shown} ${first.message}`, {
      field: first.field,
    });
  }
  const field = first.field === where ? where : `${where === 'body' ? '' : `${where} `}${first.field}`;
  throw OrchError.invalid(`${field}: ${first.message}`, details);
}
