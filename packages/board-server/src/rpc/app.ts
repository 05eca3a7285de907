import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import {
  ERROR_TAGS,
  fail,
  isProcedureName,
  LAST_EVENT_ID_PATTERN,
  LIVE_PROCEDURE,
  ok,
  PROCEDURES,
  type ProcedureInput,
  type ProcedureName,
} from '@board/protocol';
import { metricsAnswer, UNMATCHED_ROUTE } from '@support/server';
import type { ZodType } from 'zod';
import { authorize, type RequestScope } from '../auth/authorize.js';
import { EncodedJson } from '../encoded-json.js';
import { type BoardError, boardError, toWireError } from '../errors.js';
import type { BoardNodeMetrics } from '../metrics.js';
import { BOARD_NODE_VERSION } from '../version.js';
import { ResponseSink } from '../watch/response-sink.js';
import type { NodeContext } from './handlers.js';
import { handlers } from './handlers.js';
import { MAX_JSON_DEPTH, tooDeep } from './json-depth.js';

const ENVELOPE_HEAD = Buffer.from('{"status":"ok","value":');
const ENVELOPE_TAIL = Buffer.from('}');
const JSON_TYPE = 'application/json';

/** Largest request body accepted, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** `POST /rpc/<procedure>`: everything after it is the procedure's name, exactly as sent. */
const RPC_PREFIX = '/rpc/';

/** One request, its response, and what it has got to (for its error answer and its metrics). */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** `process.hrtime.bigint()` when it arrived. */
  started: bigint;
  /** Route template (bounded), the metrics label; `unmatched` until a route matched. */
  route: string;
  procedure: ProcedureName | undefined;
  /** True once the handler started: its errors travel with HTTP 200. */
  handlerRan: boolean;
}

/**
 * The path of the request target exactly as the client sent it: no dot segments resolved, no
 * percent-decoding (absolute-form targets lose their scheme and authority). Routes match this
 * string, so `/rpc/node.stats/../mutate.insert` or `/rpc/mutate%2Einsert` is the unknown procedure
 * it literally names, not `mutate.insert` (a proxy in front that allows some procedures by path
 * cannot be misled).
 */
function rawPath(target: string): string {
  const path = target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '');
  const end = path.search(/[?#]/);
  return end < 0 ? path : path.slice(0, end);
}

/**
 * The node's HTTP surface, on `node:http` itself: `POST /rpc/<procedure>`, `GET /watch`,
 * `GET /health`, `GET /metrics`. A point query is about a millisecond end to end, and a framework's
 * request/response objects and middleware chain were a measured share of it (README, "The HTTP
 * layer"); four routes need no router. Errors are mapped to HTTP and the envelope in
 * {@link answerError} and nowhere else: an error from a handler that ran travels with 200; an
 * error raised before (route, auth, board, body) with its status from the spec's table; nothing
 * answers 500.
 */
export function createRequestListener(ctx: NodeContext, metrics?: BoardNodeMetrics): RequestListener {
  const auth = { on: ctx.config.auth === 'on', secret: ctx.config.tokenSecret };

  /** Counts the request as answered (a watch stream: once its head is written). */
  const observe = (ex: Exchange, status: number) => {
    const seconds = Number(process.hrtime.bigint() - ex.started) / 1e9;
    metrics?.http.observe(ex.route, ex.req.method ?? 'OTHER', status, seconds);
  };

  /** Writes a whole answer and counts it. */
  const answer = (ex: Exchange, status: number, contentType: string, body: Buffer | string) => {
    const { req, res } = ex;
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    }
    observe(ex, status);
  };

  const answerError = (ex: Exchange, err: unknown) => {
    const { tag, message } = toWireError(err, ctx.log);
    if (ex.procedure) metrics?.procedure(ex.procedure, tag);
    const status = ex.handlerRan ? 200 : ERROR_TAGS[tag] === 200 ? 400 : ERROR_TAGS[tag];
    answer(ex, status, JSON_TYPE, JSON.stringify(fail(tag, message)));
  };

  const rpc = async (exchange: Exchange, name: string) => {
    const { req } = exchange;
    if (!isProcedureName(name)) {
      throw boardError('UnknownProcedure', `unknown procedure ${JSON.stringify(name.slice(0, 100))}`);
    }
    exchange.procedure = name;
    const scope = await authorize(req.headers, PROCEDURES[name].verb, auth);
    const input = await parseBody<unknown>(req, name, PROCEDURES[name].input);
    exchange.handlerRan = true;
    const value = await runHandler(name, ctx, scope, input);
    metrics?.procedure(name, 'ok');
    // Encoded by the handler (under its deadline and size bounds): wrapped, not re-encoded.
    const body =
      value instanceof EncodedJson
        ? Buffer.concat([ENVELOPE_HEAD, ...value.parts, ENVELOPE_TAIL])
        : JSON.stringify(ok(value));
    answer(exchange, 200, JSON_TYPE, body);
  };

  const watch = async (exchange: Exchange) => {
    const { req, res } = exchange;
    const scope = await authorize(req.headers, 'read', auth);
    const query = (req.url ?? '').indexOf('?');
    const afterRaw = query < 0 ? null : new URLSearchParams((req.url ?? '').slice(query + 1)).get('after');
    let after: number | undefined;
    if (afterRaw !== null && afterRaw !== '') {
      if (!/^\d{1,15}$/.test(afterRaw))
        throw boardError('InvalidInput', '"after" must be a watermark (an integer >= 0)');
      after = Number(afterRaw);
    }
    exchange.handlerRan = true;
    // Written straight to the socket: the board's feed encodes each change once and writes the
    // same bytes to every stream (see src/watch/). The stream counts until its head.
    const sink = new ResponseSink(res);
    observe(exchange, 200);
    ctx.watch
      .open(sink, scope.board, after, scope.expiresAt)
      .catch((err: unknown) => ctx.log.error({ err }, 'watch stream failed'));
  };

  /** `POST /live`: a live query (`src/live/`), streamed like a watch once the request is valid. */
  const live = async (exchange: Exchange) => {
    const { req, res } = exchange;
    const scope = await authorize(req.headers, LIVE_PROCEDURE.verb, auth);
    const lastId = req.headers['last-event-id'];
    if (lastId !== undefined && (typeof lastId !== 'string' || !LAST_EVENT_ID_PATTERN.test(lastId))) {
      throw boardError(
        'InvalidInput',
        'Last-Event-ID must be a watermark (an integer >= 0) a live stream sent',
      );
    }
    const input = await parseBody(req, LIVE_PROCEDURE.name, LIVE_PROCEDURE.input);
    exchange.handlerRan = true;
    const sink = new ResponseSink(res);
    observe(exchange, 200);
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    ctx.live
      .open(sink, {
        board: scope.board,
        input,
        resumeFrom: lastId === undefined ? undefined : Number(lastId),
        expiresAt: scope.expiresAt,
        token: auth.on ? bearer : undefined,
      })
      .catch((err: unknown) => ctx.log.error({ err }, 'live stream failed'));
  };

  return (req, res) => {
    const exchange: Exchange = {
      req,
      res,
      started: process.hrtime.bigint(),
      route: UNMATCHED_ROUTE,
      procedure: undefined,
      handlerRan: false,
    };
    const path = rawPath(req.url ?? '/');
    const method = req.method ?? '';
    const read = method === 'GET' || method === 'HEAD';
    let served: Promise<void> | void;
    try {
      if (method === 'POST' && path.startsWith(RPC_PREFIX)) {
        exchange.route = '/rpc/:procedure';
        served = rpc(exchange, path.slice(RPC_PREFIX.length));
      } else if (method === 'POST' && path === LIVE_PROCEDURE.path) {
        exchange.route = LIVE_PROCEDURE.path;
        served = live(exchange);
      } else if (method === 'GET' && path === '/watch') {
        exchange.route = '/watch';
        served = watch(exchange);
      } else if (read && path === '/health') {
        exchange.route = '/health';
        const body = JSON.stringify({ ok: true, nodeId: ctx.config.nodeId, version: BOARD_NODE_VERSION });
        served = answer(exchange, 200, JSON_TYPE, body);
      } else if (read && path === '/metrics' && metrics) {
        exchange.route = '/metrics';
        served = metricsAnswer(metrics.registry).then(({ contentType, body }) =>
          answer(exchange, 200, contentType, body),
        );
      } else {
        throw boardError('NotFound', `no route ${method.slice(0, 20)} ${JSON.stringify(path.slice(0, 200))}`);
      }
    } catch (err) {
      return answerError(exchange, err);
    }
    served?.catch((err: unknown) => answerError(exchange, err));
  };
}

const bodyTooLarge = () => boardError('InvalidInput', `request body larger than ${MAX_BODY_BYTES} bytes`);

/**
 * The request body's bytes, at most {@link MAX_BODY_BYTES} (a declared length past it is refused
 * before any of it is read; a streamed body as soon as it crosses it).
 */
function readBody(incoming: IncomingMessage): Promise<Buffer> {
  const declared = Number(incoming.headers['content-length']);
  if (declared > MAX_BODY_BYTES) return Promise.reject(bodyTooLarge());
  if (incoming.readableDidRead) {
    return Promise.reject(boardError('InvalidInput', 'could not read the request body'));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: BoardError) => {
      incoming.off('data', onData).off('end', onEnd).off('error', onFail).off('close', onClose);
      if (err) {
        // Stop buffering; what the client still sends is read and dropped.
        incoming.resume();
        reject(err);
      } else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
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

/**
 * The request body as the procedure's input. Nesting deeper than {@link MAX_JSON_DEPTH} is refused
 * before `JSON.parse` (a cheap pass over the bytes; parsing deep nesting took seconds per MB with
 * the event loop blocked); then JSON, then the procedure's schema.
 */
async function parseBody<T>(
  req: IncomingMessage,
  name: ProcedureName | typeof LIVE_PROCEDURE.name,
  schema: ZodType<T, unknown>,
): Promise<T> {
  const bytes = await readBody(req);
  if (tooDeep(bytes)) {
    throw boardError(
      'InvalidInput',
      `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; no procedure's input needs more than 4`,
    );
  }
  const text = bytes.toString('utf8');
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
  const parsed = schema.safeParse(body);
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
