import {
  ERROR_TAGS,
  fail,
  isProcedureName,
  ok,
  PROCEDURES,
  type ProcedureInput,
  type ProcedureName,
} from '@board/protocol';
import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { metricsAnswer } from '@support/server';
import { type Context, Hono } from 'hono';
import { routePath } from 'hono/route';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { authorize, type RequestScope } from '../auth/authorize.js';
import { EncodedJson } from '../encoded-json.js';
import { BoardError, boardError, toWireError } from '../errors.js';
import type { BoardNodeMetrics } from '../metrics.js';
import { ResponseSink } from '../watch/response-sink.js';
import type { NodeContext } from './handlers.js';
import { handlers } from './handlers.js';

const ENVELOPE_HEAD = Buffer.from('{"status":"ok","value":');
const ENVELOPE_TAIL = Buffer.from('}');

/** Largest request body accepted, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

type Env = {
  Bindings: Partial<HttpBindings>;
  Variables: { handlerRan: boolean; procedure: ProcedureName };
};

/**
 * The path of the request target exactly as the client sent it: no dot segments resolved, no
 * percent-decoding (absolute-form targets lose their scheme and authority). Undefined when the app
 * runs without a Node HTTP server (e.g. `app.request` in-process).
 */
function rawPath(c: Context<Env>): string | undefined {
  const target = c.env?.incoming?.url;
  if (target === undefined) return undefined;
  const path = target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '');
  const end = path.search(/[?#]/);
  return end < 0 ? path : path.slice(0, end);
}

/**
 * The node's HTTP surface: `POST /rpc/<procedure>`, `GET /watch`, `GET /health`.
 * Errors are mapped to HTTP and the envelope here, in `onError`, and nowhere else: an error from a
 * handler that ran travels with 200; an error raised before (auth, board, body) with its status
 * from the spec's table; nothing answers 500.
 */
export function createApp(ctx: NodeContext, metrics?: BoardNodeMetrics): Hono<Env> {
  const app = new Hono<Env>();
  // First, so that refusals are counted too. `/metrics` is open like `/health` (see the README).
  if (metrics) {
    app.use(metrics.http.middleware((c: Context<Env>) => routePath(c, -1)));
  }
  const auth = { on: ctx.config.auth === 'on', secret: ctx.config.tokenSecret };

  // Paths are matched exactly as sent. The URL parser under Hono resolves dot segments and
  // percent-escapes (`/rpc/node.stats/../mutate.insert` would run `mutate.insert`), so a proxy in
  // front that allows some procedures could be misled: a path that changes under normalisation is
  // answered here, before any route, as the unknown procedure or route it literally names.
  app.use(async (c, next) => {
    const raw = rawPath(c);
    if (raw === undefined || raw === c.req.path) return await next();
    if (raw.startsWith('/rpc/')) {
      throw boardError('UnknownProcedure', `unknown procedure ${JSON.stringify(raw.slice(5, 105))}`);
    }
    throw boardError('NotFound', `no route ${c.req.method} ${JSON.stringify(raw.slice(0, 200))}`);
  });

  app.get('/health', (c) => c.json({ ok: true, nodeId: ctx.config.nodeId }));
  if (metrics) {
    app.get('/metrics', async (c) => {
      const { contentType, body } = await metricsAnswer(metrics.registry);
      return c.body(body, 200, { 'content-type': contentType });
    });
  }

  app.post('/rpc/:procedure', async (c) => {
    const name = c.req.param('procedure');
    if (!isProcedureName(name)) {
      throw boardError('UnknownProcedure', `unknown procedure "${name.slice(0, 100)}"`);
    }
    c.set('procedure', name);
    const scope = await authorize(c.req.raw.headers, PROCEDURES[name].verb, auth);
    const input = await parseBody(c, name);
    c.set('handlerRan', true);
    const value = await runHandler(name, ctx, scope, input);
    metrics?.procedure(name, 'ok');
    if (value instanceof EncodedJson) {
      // Encoded by the handler (under its deadline and size bounds): wrapped, not re-encoded.
      const body = Buffer.concat([ENVELOPE_HEAD, ...value.parts, ENVELOPE_TAIL]);
      return c.body(body, 200, { 'content-type': 'application/json' });
    }
    return c.json(ok(value));
  });

  app.get('/watch', async (c) => {
    const scope = await authorize(c.req.raw.headers, 'read', auth);
    const afterRaw = c.req.query('after');
    let after: number | undefined;
    if (afterRaw !== undefined && afterRaw !== '') {
      if (!/^\d{1,15}$/.test(afterRaw))
        throw boardError('InvalidInput', '"after" must be a watermark (an integer >= 0)');
      after = Number(afterRaw);
    }
    c.set('handlerRan', true);
    const res = c.env.outgoing;
    if (!res) throw boardError('Internal', 'watch streams need the node HTTP server');
    // Written straight to the socket: the board's feed encodes each change once and writes the
    // same bytes to every stream (see src/watch/).
    ctx.watch
      .open(new ResponseSink(res), scope.board, after, scope.expiresAt)
      .catch((err: unknown) => ctx.log.error({ err }, 'watch stream failed'));
    return RESPONSE_ALREADY_SENT;
  });

  app.notFound((c) => c.json(fail('NotFound', `no route ${c.req.method} ${c.req.path.slice(0, 200)}`), 404));

  app.onError((err, c) => {
    const ran = c.get('handlerRan') === true;
    const { tag, message } = toWireError(err, ctx.log);
    const procedure = c.get('procedure');
    if (procedure) metrics?.procedure(procedure, tag);
    const status = ran ? 200 : ERROR_TAGS[tag] === 200 ? 400 : ERROR_TAGS[tag];
    return c.json(fail(tag, message), status as ContentfulStatusCode);
  });

  return app;
}

const bodyTooLarge = () => boardError('InvalidInput', `request body larger than ${MAX_BODY_BYTES} bytes`);

/**
 * The request body as text, at most {@link MAX_BODY_BYTES}. Under the Node server it is read from
 * Node's request stream itself: going through the web `Request` (as `c.req.text()` or Hono's
 * body-limit middleware do) builds a `Request`, a web stream and a stream adapter per request, a
 * measurable share of a point query's time (see the README, "Request bodies").
 */
async function readBodyText(c: Context<Env>): Promise<string> {
  const incoming = c.env?.incoming;
  if (!incoming) {
    const text = await c.req.text();
    if (Buffer.byteLength(text) > MAX_BODY_BYTES) throw bodyTooLarge();
    return text;
  }
  const declared = Number(incoming.headers['content-length']);
  if (declared > MAX_BODY_BYTES) throw bodyTooLarge();
  if (incoming.readableDidRead) throw boardError('InvalidInput', 'could not read the request body');
  return await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: BoardError) => {
      incoming.off('data', onData).off('end', onEnd).off('error', onFail).off('close', onClose);
      if (err) {
        // Stop buffering; what the client still sends is read and dropped.
        incoming.resume();
        reject(err);
      } else
        resolve(
          chunks.length === 1
            ? (chunks[0] as Buffer).toString('utf8')
            : Buffer.concat(chunks).toString('utf8'),
        );
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) done(bodyTooLarge());
      else chunks.push(chunk);
    };
    const onEnd = () => done();
    const onFail = () => done(boardError('InvalidInput', 'could not read the request body'));
    const onClose = () => {
      if (!incoming.readableEnded) onFail();
    };
    incoming.on('data', onData).on('end', onEnd).on('error', onFail).on('close', onClose);
  });
}

async function parseBody(c: Context<Env>, name: ProcedureName): Promise<unknown> {
  let text: string;
  try {
    text = await readBodyText(c);
  } catch (err) {
    if (err instanceof BoardError) throw err;
    throw boardError('InvalidInput', 'could not read the request body');
  }
  let body: unknown;
  if (text.trim() === '') {
    body = name === 'node.stats' ? {} : undefined;
    if (body === undefined) throw boardError('InvalidInput', 'request body is empty; expected JSON');
  } else {
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw boardError('InvalidInput', `request body is not valid JSON: ${(err as Error).message}`);
    }
  }
  const parsed = PROCEDURES[name].input.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
    throw boardError('InvalidInput', `invalid ${name} input${where}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

async function runHandler(
  name: ProcedureName,
  ctx: NodeContext,
  scope: RequestScope,
  input: unknown,
): Promise<unknown> {
  // The input was parsed with PROCEDURES[name].input just above, so the cast only restates that.
  const handler = handlers[name] as (
    ctx: NodeContext,
    scope: RequestScope,
    input: ProcedureInput<typeof name>,
  ) => Promise<unknown>;
  return await handler(ctx, scope, input as ProcedureInput<typeof name>);
}
