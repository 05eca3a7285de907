import { errorFromBody, OrchError } from '@orch/protocol';
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { buildApp } from '../src/api/app.js';
import { BearerAuth } from '../src/api/auth.js';
import { AgentError } from '../src/errors.js';
import type { ArtifactTransfer } from '../src/transfer/artifact-transfer.js';
import type { VmManager } from '../src/vm/vm-manager.js';

/**
 * The agent's routes (the protocol's path table) check every VM and snapshot id against its
 * pattern before the VM manager sees it: traversal and odd encodings are `404 not_found` and touch
 * nothing. Errors are the protocol's one class, so orchd reads back the agent's code and details.
 */
const TOKEN = 'agent-token';
const calls: string[] = [];
/** A VM manager that records which ids reached it and fails like a full disk. */
const vms = new Proxy(
  {},
  {
    get: (_t, method: string) => (id: unknown) => {
      calls.push(`${method} ${String(id)}`);
      throw AgentError.diskFull('the host disk is full');
    },
  },
) as unknown as VmManager;
const app = buildApp({
  auth: new BearerAuth(TOKEN),
  vms,
  transfer: vms as unknown as ArtifactTransfer,
  info: async () => {
    throw new Error('unused');
  },
  logger: pino({ level: 'silent' }),
});
const call = (method: string, path: string, body?: unknown) =>
  app.request(path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('route ids', () => {
  const bad = [
    '..%2F..%2Fvictim',
    '%2e%2e%2fvictim',
    '..%252F..',
    '%00',
    'a%00b',
    '%ff',
    '.hidden',
    'x'.repeat(64),
  ];
  const routes: [string, (id: string) => string, unknown][] = [
    ['GET', (id) => `/v1/vms/${id}`, undefined],
    ['DELETE', (id) => `/v1/vms/${id}`, undefined],
    ['POST', (id) => `/v1/vms/${id}/exec`, { argv: ['true'] }],
    ['GET', (id) => `/v1/vms/${id}/log`, undefined],
    ['GET', (id) => `/v1/vms/${id}/console`, undefined],
    ['POST', (id) => `/v1/vms/${id}/snapshots`, { snapshot_id: 's1' }],
    ['DELETE', (id) => `/v1/snapshots/${id}`, undefined],
    ['GET', (id) => `/v1/snapshots/${id}/data`, undefined],
  ];
  test('an id outside the pattern is 404 and never reaches the VM manager', async () => {
    for (const [method, path, body] of routes) {
      for (const id of bad) {
        const res = await call(method, path(id), body);
        expect(res.status, `${method} ${path(id)}`).toBe(404);
        expect(errorFromBody(res.status, await res.json()).code).toMatch(/^(not_found|route_not_found)$/);
      }
    }
    expect(calls).toEqual([]);
  });

  test('a valid id reaches it, and its error keeps code and details on the wire', async () => {
    const res = await call('DELETE', '/v1/snapshots/snap_1');
    expect(calls).toEqual(['deleteSnapshot snap_1']);
    const e = errorFromBody(res.status, await res.json());
    expect(e).toBeInstanceOf(OrchError);
    expect([e.status, e.code, e.details]).toEqual([503, 'unavailable', { reason: 'disk_full' }]);
  });

  test('a body with a "__proto__" key is 400 naming it and never reaches the VM manager', async () => {
    calls.length = 0;
    const res = await call('POST', '/v1/vms/vm_1/exec', { argv: ['true'], env: { ['__proto__']: 'x' } });
    expect(res.status).toBe(400);
    const e = errorFromBody(res.status, await res.json());
    expect([e.code, e.message, e.details]).toEqual([
      'invalid_argument',
      'env.__proto__: "__proto__" is not accepted as a name (no field takes it)',
      { field: 'env', path: 'env.__proto__' },
    ]);
    expect(calls).toEqual([]);
  });

  test('AgentError is the protocol class', () => {
    expect(AgentError.notFound('VM', 'x')).toBeInstanceOf(OrchError);
  });
});
