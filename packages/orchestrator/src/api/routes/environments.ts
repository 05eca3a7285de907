import type { HttpBindings } from '@hono/node-server';
import {
  agentId,
  CreateEnvironmentRequest,
  CreateSnapshotBody,
  Environment,
  EnvironmentAction,
  EnvironmentList,
  EnvironmentListQuery,
  EnvironmentLogsQuery,
  ExecRequest,
  ExecResult,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  IdempotencyKey,
  LOG_OFFSET_HEADER,
  LOG_SIZE_HEADER,
  OrchError,
  RestoreSnapshotBody,
  Snapshot,
  SnapshotList,
  SnapshotListQuery,
} from '@orch/protocol';
import { z } from 'zod';
import type { Principal } from '../../auth/authenticator.js';
import { type ConnectionGuard, unlessEnded } from '../../auth/connection-guard.js';
import { type CreateKey, keyScope } from '../../environments/create-key.js';
import type { EnvironmentService } from '../../environments/environment-service.js';
import type { LogService } from '../../environments/log-service.js';
import type { PauseService } from '../../environments/pause-service.js';
import type { SnapshotService } from '../../environments/snapshot-service.js';
import type { SnapshotsRepo } from '../../store/snapshots-repo.js';
import { type AnyRoute, route } from '../route.js';

/** Environment and snapshot ids are {@link AGENT_ID}s; any other is `404 not_found` before any lookup. */
const IdParam = z.object({ id: agentId() });
const SnapshotIdParam = z.object({ snapshotId: agentId() });

/**
 * The `Idempotency-Key` of a create, scoped to its caller; undefined when none was sent. A malformed
 * one is `400 invalid_argument` naming the header (never echoed).
 */
function idempotencyKey(header: string | undefined, principal: Principal | undefined): CreateKey | undefined {
  if (header === undefined) return undefined;
  const parsed = IdempotencyKey.safeParse(header);
  if (!parsed.success) {
    throw OrchError.invalid(`${IDEMPOTENCY_KEY_HEADER}: ${parsed.error.issues[0]?.message ?? 'invalid'}`, {
      field: IDEMPOTENCY_KEY_HEADER,
    });
  }
  return { scope: keyScope(principal), key: parsed.data };
}

/** `/v1/environments` and `/v1/snapshots`. */
export function environmentRoutes(
  envs: EnvironmentService,
  pauses: PauseService,
  snapshots: SnapshotService,
  snapshotsRepo: SnapshotsRepo,
  logs: LogService,
  guard: ConnectionGuard,
): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/v1/environments',
      access: 'authenticated',
      tag: 'environments',
      summary:
        'Create an environment from a compiled definition (orch compile --format json, with secret values). With an Idempotency-Key header, a retry with the same key and request (same caller, within the retention) answers the environment the first create made (Idempotent-Replayed: true); another request under the same key is 409',
      body: CreateEnvironmentRequest,
      headers: {
        [IDEMPOTENCY_KEY_HEADER]: {
          schema: IdempotencyKey,
          description:
            "Makes the create safe to retry: the same key and request from the same caller within ORCH_IDEMPOTENCY_RETENTION_HOURS answer the first create's environment",
        },
      },
      success: { status: 201, schema: Environment, description: 'Placed and being created (state creating)' },
      handler: async ({ body, principal, c }) => {
        const key = idempotencyKey(c.req.header(IDEMPOTENCY_KEY_HEADER), principal);
        const seed = body.seed_snapshot_id ? await snapshotsRepo.get(body.seed_snapshot_id) : undefined;
        if (body.seed_snapshot_id && seed?.state !== 'ready') {
          throw OrchError.invalid(`seed_snapshot_id ${body.seed_snapshot_id} is not a ready snapshot`, {
            field: 'seed_snapshot_id',
          });
        }
        // from-build boots a build artifact; any other snapshot is restored with its own request.
        if (seed && !seed.layer_key) {
          throw OrchError.invalid(
            `seed_snapshot_id ${seed.id} is not a build layer (it has no layer_key); build one with orch build, or restore this snapshot with orch snapshot restore`,
            { field: 'seed_snapshot_id' },
          );
        }
        const { environment, replayed } = await envs.createKeyed(body, {
          ...(seed ? { seed } : {}),
          ...(key ? { key } : {}),
        });
        return {
          status: 201,
          body: environment,
          ...(replayed ? { headers: { [IDEMPOTENT_REPLAYED_HEADER]: 'true' } } : {}),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/v1/environments',
      access: 'authenticated',
      tag: 'environments',
      summary: 'List environments, newest first (filters: state, task_id, host_id)',
      query: EnvironmentListQuery,
      success: { status: 200, schema: EnvironmentList, description: 'Environments' },
      handler: async ({ query }) => ({ status: 200, body: { environments: await envs.list(query) } }),
    }),
    route({
      method: 'GET',
      path: '/v1/environments/{id}',
      access: 'authenticated',
      tag: 'environments',
      summary: 'Read one environment',
      params: IdParam,
      success: { status: 200, schema: Environment, description: 'The environment' },
      handler: async ({ params }) => ({ status: 200, body: await envs.get(params.id) }),
    }),
    route({
      method: 'DELETE',
      path: '/v1/environments/{id}',
      access: 'authenticated',
      tag: 'environments',
      summary: 'Stop the VM and free its capacity (idempotent)',
      params: IdParam,
      success: {
        status: 200,
        schema: Environment,
        description: 'The environment, stopped (or stopping if its agent is unreachable)',
      },
      handler: async ({ params }) => ({ status: 200, body: await envs.delete(params.id) }),
    }),
    route({
      method: 'POST',
      path: '/v1/environments/{id}',
      access: 'authenticated',
      tag: 'environments',
      summary:
        '?action=exec: run a command in the guest (master; body ExecRequest, answer ExecResult). ?action=pause: save the VM in place and free its CPU and RAM (running -> paused). ?action=resume: continue it where it stopped (paused -> running). Pause and resume: any authenticated caller, no body, answer the Environment; 409 from any other state',
      params: IdParam,
      query: EnvironmentAction,
      body: ExecRequest,
      masterWhen: (query) => query.action === 'exec',
      bodyWhen: (query: { action: string }) => query.action === 'exec',
      success: {
        status: 200,
        schema: z.union([ExecResult, Environment]),
        description: 'exec: exit code and output (base64); pause and resume: the environment',
      },
      handler: async ({ params, query, body, principal }) => {
        if (query.action === 'pause') return { status: 200, body: await pauses.pause(params.id) };
        if (query.action === 'resume') return { status: 200, body: await pauses.resume(params.id) };
        // A command may run for up to a day: if the session that sent it ends meanwhile, the
        // answer is that 401, not its output (the command itself runs on in the guest).
        const hold = guard.hold(principal);
        try {
          return { status: 200, body: await unlessEnded(envs.exec(params.id, body), hold.signal) };
        } finally {
          hold.release();
        }
      },
    }),
    route({
      method: 'GET',
      path: '/v1/environments/{id}/attach',
      access: 'master',
      websocket: true,
      tag: 'environments',
      summary:
        "The guest's serial console over WebSocket (binary frames both ways); without an Upgrade: websocket header, 426",
      params: IdParam,
      success: { status: 200, description: 'Never: the console is served only as a WebSocket upgrade' },
      handler: async ({ params }) => {
        await envs.get(params.id);
        throw new OrchError(
          'invalid_argument',
          'attach is a WebSocket: send the request with "Connection: Upgrade" and "Upgrade: websocket"',
          { upgrade: 'websocket' },
          426,
          { upgrade: 'websocket' },
        );
      },
    }),
    route({
      method: 'GET',
      path: '/v1/environments/{id}/logs',
      access: 'authenticated',
      tag: 'environments',
      summary:
        "The startup script's output, or with ?service=NAME that service's stdout and stderr (text/plain, raw bytes): a window of at most 1 MiB from ?offset= (default 0) or the last ?tail= bytes, with x-log-offset and x-log-size; ?follow=true (x-log-offset only) keeps the answer open and streams new output until the environment stops. 409 once the environment is stopped (the log goes with its VM)",
      params: IdParam,
      query: EnvironmentLogsQuery,
      errors: [409],
      success: { status: 200, mediaType: 'text/plain', description: 'The log bytes' },
      handler: async ({ params, query, c, principal }) => {
        const { follow, ...window } = query;
        const headers = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' };
        if (follow) {
          // Held until the answer closes. A raw log has no way to say "error" in band, so when the
          // caller's session or key ends the answer is cut (its socket destroyed), not finished:
          // clients see a dropped connection, and their reconnect gets the 401, never a clean end
          // that would read as "the environment stopped".
          const hold = guard.hold(principal);
          const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
          let followed: Awaited<ReturnType<LogService['follow']>>;
          try {
            followed = await logs.follow(params.id, window, AbortSignal.any([c.req.raw.signal, hold.signal]));
          } catch (err) {
            hold.release();
            throw err;
          }
          if (hold.signal.aborted) {
            // Ended while the first window was read: nothing was sent yet, so it is a plain 401.
            await followed.stream.cancel();
            throw hold.signal.reason;
          }
          outgoing?.once('close', hold.release);
          hold.signal.addEventListener('abort', () => outgoing?.destroy(), { once: true });
          const { stream, offset } = followed;
          return {
            status: 200,
            raw: new Response(stream, { headers: { ...headers, [LOG_OFFSET_HEADER]: String(offset) } }),
          };
        }
        const log = await logs.window(params.id, window);
        return {
          status: 200,
          raw: new Response(Buffer.from(log.bytes), {
            headers: {
              ...headers,
              [LOG_OFFSET_HEADER]: String(log.offset),
              [LOG_SIZE_HEADER]: String(log.size),
            },
          }),
        };
      },
    }),
    route({
      method: 'POST',
      path: '/v1/environments/{id}/snapshots',
      access: 'authenticated',
      tag: 'snapshots',
      summary: 'Snapshot a running environment (disk, or disk plus memory with live: true)',
      params: IdParam,
      body: CreateSnapshotBody,
      success: {
        status: 201,
        schema: Snapshot,
        description: 'The snapshot (state ready, or error with last_error)',
      },
      handler: async ({ params, body }) => ({ status: 201, body: await snapshots.create(params.id, body) }),
    }),
    route({
      method: 'GET',
      path: '/v1/snapshots',
      access: 'authenticated',
      tag: 'snapshots',
      summary: 'List snapshots, newest first (filters: vm_id, task_id, state)',
      query: SnapshotListQuery,
      success: { status: 200, schema: SnapshotList, description: 'Snapshots' },
      handler: async ({ query }) => ({ status: 200, body: { snapshots: await snapshots.list(query) } }),
    }),
    route({
      method: 'GET',
      path: '/v1/snapshots/{snapshotId}',
      access: 'authenticated',
      tag: 'snapshots',
      summary: 'Read one snapshot (unknown id and store failures: 404 not_found)',
      params: SnapshotIdParam,
      success: { status: 200, schema: Snapshot, description: 'The snapshot' },
      handler: async ({ params }) => ({ status: 200, body: await snapshots.get(params.snapshotId) }),
    }),
    route({
      method: 'DELETE',
      path: '/v1/snapshots/{snapshotId}',
      access: 'authenticated',
      tag: 'snapshots',
      summary: 'Delete a snapshot and its artifact',
      params: SnapshotIdParam,
      success: { status: 204, description: 'Deleted' },
      handler: async ({ params }) => {
        await snapshots.delete(params.snapshotId);
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: '/v1/snapshots/{snapshotId}/restore',
      access: 'authenticated',
      tag: 'snapshots',
      summary: 'A new environment from the snapshot: live resumes where it stopped, disk cold-boots',
      params: SnapshotIdParam,
      body: RestoreSnapshotBody,
      success: { status: 201, schema: Environment, description: 'The new environment (state creating)' },
      handler: async ({ params, body }) => ({
        status: 201,
        body: await snapshots.restore(params.snapshotId, body),
      }),
    }),
  ];
}
