import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import {
  AGENT_ID,
  AGENT_ID_RULE,
  AGENT_PATHS,
  AGENT_ROUTES,
  AGENT_VM_PATHS,
  type AgentInfo,
  AgentLogQuery,
  CreateSnapshotRequest,
  CreateVmRequest,
  DestinationCheck,
  ExecRequest,
  issuesDetails,
  LOG_OFFSET_HEADER,
  LOG_SIZE_HEADER,
  parseJsonBody,
  SnapshotExportRequest,
  SnapshotFetchRequest,
  TRANSFER_GRANT_HEADER,
  TRANSFER_ROUTES,
} from '@orch/protocol';
import { metricsAnswer, requestIdMiddleware } from '@support/server';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { routePath } from 'hono/route';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { AgentError } from '../errors.js';
import type { AgentMetrics } from '../metrics.js';
import type { ArtifactTransfer } from '../transfer/artifact-transfer.js';
import type { VmManager } from '../vm/vm-manager.js';
import type { BearerAuth } from './auth.js';

/** A path segment percent-decoded; a malformed one stays as it is (and matches no id). */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** `GET /v1/snapshots/{id}/files/{name}`, the one route a transfer grant opens. */
const SNAPSHOT_FILE_PATH = /^\/v1\/snapshots\/([^/]+)\/files\/[^/]+$/;

/** Largest request body: 16 MiB (exec stdin and startup scripts travel in JSON). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

export interface AppDeps {
  readonly auth: BearerAuth;
  readonly vms: VmManager;
  /** Exports and fetches of snapshot artifacts (transfer/). */
  readonly transfer: ArtifactTransfer;
  readonly info: () => Promise<AgentInfo>;
  readonly logger: Logger;
  /** Prometheus metrics; `GET /metrics` and the HTTP series (absent in unit tests). */
  readonly metrics?: AgentMetrics;
}

/**
 * The agent's HTTP API (agent protocol of @orch/protocol): bearer auth on every request, zod
 * validation, and the one place where errors become `{ error: { code, message, details? } }`.
 * The console WebSocket is served by `console-ws.ts` on the same port.
 */
export function buildApp(deps: AppDeps): Hono {
  const { vms } = deps;
  const app = new Hono();

  const template = (c: Context) => routePath(c, -1);
  // First, so that refusals (401, 413) are logged under the request id (orchd's, when it sends
  // one) and counted.
  app.use('*', requestIdMiddleware(deps.logger, template));
  if (deps.metrics) app.use('*', deps.metrics.http.middleware(template));
  app.use('*', async (c, next) => {
    // Another agent fetching one snapshot's files for a cross-host restore or a move brings a
    // transfer grant for that snapshot instead of this agent's token (nothing else opens with it).
    const file = c.req.method === 'GET' ? SNAPSHOT_FILE_PATH.exec(c.req.path) : null;
    const grant = c.req.header(TRANSFER_GRANT_HEADER);
    const granted = file !== null && grant !== undefined && deps.auth.allowsGrant(grant, decoded(file[1]!));
    if (!granted && !deps.auth.allows(c.req.header('authorization'))) {
      c.header('WWW-Authenticate', 'Bearer realm="orch-agent"');
      throw new AgentError('unauthorized', 'missing or invalid bearer token');
    }
    await next();
  });
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new AgentError(
          'invalid_argument',
          `the request body is larger than ${MAX_BODY_BYTES} bytes`,
          undefined,
          413,
        );
      },
    }),
  );

  app.get(AGENT_PATHS.info, async (c) => c.json(await deps.info()));
  const metrics = deps.metrics;
  if (metrics) {
    app.get('/metrics', async (c) => {
      const { contentType, body } = await metricsAnswer(metrics.registry);
      return c.body(body, 200, { 'content-type': contentType });
    });
  }
  app.post(AGENT_VM_PATHS.vms, async (c) => c.json(await vms.create(await body(c, CreateVmRequest)), 202));
  app.get(AGENT_VM_PATHS.vms, (c) => c.json({ vms: vms.list() }));
  app.get(route(AGENT_ROUTES.vm), (c) => c.json(vms.get(pathId(c, 'id'))));
  app.delete(route(AGENT_ROUTES.vm), async (c) => {
    await vms.delete(pathId(c, 'id'));
    return c.body(null, 204);
  });
  app.post(route(AGENT_ROUTES.exec), async (c) =>
    c.json(await vms.exec(pathId(c, 'id'), await body(c, ExecRequest))),
  );
  app.get(route(AGENT_ROUTES.log), async (c) => {
    const { service, ...window } = query(c, AgentLogQuery);
    const id = pathId(c, 'id');
    const log = service === undefined ? await vms.log(id, window) : await vms.serviceLog(id, service, window);
    return c.body(new Uint8Array(log.bytes), 200, {
      'content-type': 'text/plain; charset=utf-8',
      [LOG_OFFSET_HEADER]: String(log.offset),
      [LOG_SIZE_HEADER]: String(log.size),
    });
  });
  app.post(route(AGENT_ROUTES.snapshots), async (c) =>
    c.json(await vms.snapshot(pathId(c, 'id'), await body(c, CreateSnapshotRequest)), 201),
  );
  app.post(route(AGENT_ROUTES.pause), async (c) => c.json(await vms.pause(pathId(c, 'id'))));
  app.post(route(AGENT_ROUTES.resume), async (c) => c.json(await vms.resume(pathId(c, 'id'))));
  app.delete(route(AGENT_ROUTES.snapshot), async (c) => {
    await vms.deleteSnapshot(pathId(c, 'snapshot_id'));
    return c.body(null, 204);
  });
  app.get(route(AGENT_ROUTES.snapshotData), async (c) => {
    const { path, size } = await vms.snapshotData(pathId(c, 'snapshot_id'));
    return new Response(Readable.toWeb(createReadStream(path)) as ReadableStream, {
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
    });
  });
  app.get(route(TRANSFER_ROUTES.snapshotFile), async (c) => {
    const { path, size } = await deps.transfer.file(pathId(c, 'snapshot_id'), c.req.param('name') ?? '');
    return new Response(Readable.toWeb(createReadStream(path)) as ReadableStream, {
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
    });
  });
  app.post(route(TRANSFER_ROUTES.snapshotExport), async (c) => {
    const id = pathId(c, 'snapshot_id');
    return c.json(await deps.transfer.exportTo(id, (await body(c, SnapshotExportRequest)).destination));
  });
  app.post(route(TRANSFER_ROUTES.destinationCheck), async (c) =>
    c.json(await deps.transfer.checkDestination((await body(c, DestinationCheck)).destination)),
  );
  app.post(route(TRANSFER_ROUTES.snapshotFetch), async (c) => {
    const id = pathId(c, 'snapshot_id');
    return c.json(await deps.transfer.fetch(id, await body(c, SnapshotFetchRequest)));
  });
  app.get(route(AGENT_ROUTES.console), (c) => {
    vms.get(pathId(c, 'id'));
    throw AgentError.invalid('the console is a WebSocket: send an Upgrade: websocket request');
  });

  app.notFound((c) =>
    c.json(
      new AgentError(
        'route_not_found',
        `no route for ${c.req.method} ${new URL(c.req.url).pathname}`,
      ).toBody(),
      404,
    ),
  );
  app.onError((err, c) => {
    const e = toAgentError(err);
    if (e.code === 'internal') deps.logger.error({ err, path: c.req.path }, 'unexpected error');
    return c.json(e.toBody(), e.status as 400);
  });
  return app;
}

/** Maps anything thrown to the wire error (exactly one place). */
export function toAgentError(err: unknown): AgentError {
  if (err instanceof AgentError) return err;
  if (err instanceof URIError) return AgentError.invalid('the URL has malformed percent-encoding');
  return new AgentError('internal', 'internal error');
}

/** Hono's form of a protocol path: `/v1/vms/{id}` -> `/v1/vms/:id`. */
function route(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

/**
 * A VM or snapshot id from the path, checked against {@link AGENT_ID} before anything uses it (so
 * no id, however encoded, names a path outside the data directory): anything else is `404
 * not_found`, since no VM or snapshot can have it.
 */
export function checkId(id: string, field = 'id'): string {
  if (!AGENT_ID.test(id))
    throw new AgentError('not_found', `not found: ${field} must be ${AGENT_ID_RULE}`, { field });
  return id;
}

function pathId(c: Context, name: string): string {
  return checkId(c.req.param(name) ?? '', name);
}

async function body<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  return checked(schema, parseJsonBody(await c.req.text()));
}

/** The query string, checked by `schema`. */
function query<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  return checked(schema, c.req.query());
}

function checked<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = issuesDetails(result.error.issues);
  const first = details.issues[0]!;
  throw AgentError.invalid(`${first.field}: ${first.message}`, details);
}
