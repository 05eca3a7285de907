import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import {
  AGENT_PATHS,
  AGENT_VM_PATHS,
  type AgentInfo,
  CreateSnapshotRequest,
  CreateVmRequest,
  ExecRequest,
} from '@orch/protocol';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { AgentError } from '../errors.js';
import type { VmManager } from '../vm/vm-manager.js';
import type { BearerAuth } from './auth.js';

/** Largest request body: 16 MiB (exec stdin and startup scripts travel in JSON). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

export interface AppDeps {
  readonly auth: BearerAuth;
  readonly vms: VmManager;
  readonly info: () => Promise<AgentInfo>;
  readonly logger: Logger;
}

/**
 * The agent's HTTP API (agent protocol of @orch/protocol): bearer auth on every request, zod
 * validation, and the one place where errors become `{ error: { code, message, details? } }`.
 * The console WebSocket is served by `console-ws.ts` on the same port.
 */
export function buildApp(deps: AppDeps): Hono {
  const { vms } = deps;
  const app = new Hono();

  app.use('*', async (c, next) => {
    if (!deps.auth.allows(c.req.header('authorization'))) {
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
  app.post(AGENT_VM_PATHS.vms, async (c) => c.json(await vms.create(await body(c, CreateVmRequest)), 202));
  app.get(AGENT_VM_PATHS.vms, (c) => c.json({ vms: vms.list() }));
  app.get('/v1/vms/:id', (c) => c.json(vms.get(c.req.param('id'))));
  app.delete('/v1/vms/:id', async (c) => {
    await vms.delete(c.req.param('id'));
    return c.body(null, 204);
  });
  app.post('/v1/vms/:id/exec', async (c) =>
    c.json(await vms.exec(c.req.param('id'), await body(c, ExecRequest))),
  );
  app.get('/v1/vms/:id/log', async (c) => c.text(await vms.log(c.req.param('id'))));
  app.post('/v1/vms/:id/snapshots', async (c) =>
    c.json(await vms.snapshot(c.req.param('id'), await body(c, CreateSnapshotRequest)), 201),
  );
  app.delete('/v1/snapshots/:sid', async (c) => {
    await vms.deleteSnapshot(c.req.param('sid'));
    return c.body(null, 204);
  });
  app.get('/v1/snapshots/:sid/data', async (c) => {
    const { path, size } = await vms.snapshotData(c.req.param('sid'));
    return new Response(Readable.toWeb(createReadStream(path)) as ReadableStream, {
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
    });
  });
  app.get('/v1/vms/:id/console', (c) => {
    vms.get(c.req.param('id'));
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

async function body<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const text = await c.req.text();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw AgentError.invalid(`the request body is not valid JSON: ${(err as Error).message}`);
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ field: i.path.join('.') || 'body', message: i.message }));
  throw AgentError.invalid(`${issues[0]!.field}: ${issues[0]!.message}`, { issues });
}
