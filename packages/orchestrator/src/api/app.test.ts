import { createLogger } from '@support/server';
import { describe, expect, test } from 'vitest';
import { Authenticator } from '../auth/authenticator.js';
import { CidrAllowlist } from '../auth/cidr-allowlist.js';
import { ConnectionGuard } from '../auth/connection-guard.js';
import type { ApiKeysRepo } from '../store/api-keys-repo.js';
import { buildApp } from './app.js';
import { environmentRoutes } from './routes/environments.js';

const MASTER = 'the-master-token';
const KEY = 'orch_key_a-live-key';

/**
 * The route table's access rules in process: an API key store that knows one key, and services
 * that must never be reached (a refusal comes before any of them).
 */
function app() {
  const keys = {
    findActive: async (secret: string) => (secret === KEY ? { id: 'key_1' } : undefined),
  } as unknown as ApiKeysRepo;
  const auth = new Authenticator(MASTER, keys, undefined);
  const logger = createLogger('silent');
  const unreachable = new Proxy(
    {},
    {
      get: () => {
        throw new Error('a refused request reached a service');
      },
    },
  ) as never;
  const hono = buildApp(
    { auth, allowlist: new CidrAllowlist([]), logger },
    environmentRoutes(
      unreachable,
      unreachable,
      unreachable,
      unreachable,
      unreachable,
      new ConnectionGuard({}, 5000, logger),
    ),
  );
  return (path: string, token: string, body: string) =>
    hono.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    });
}

describe('exec is master-only whatever else is wrong with the request', () => {
  const post = app();
  test.each([
    ['a body that is not an ExecRequest', '/v1/environments/env_1?action=exec', '{"argv":"not a list"}'],
    ['a body that is not JSON', '/v1/environments/env_1?action=exec', 'not json'],
    ['no body', '/v1/environments/env_1?action=exec', ''],
    ['an id outside its pattern', '/v1/environments/..bad..?action=exec', '{"argv":["true"]}'],
  ])('an API key with %s: 403 unauthorized, before any validation', async (_what, path, body) => {
    const res = await post(path, KEY, body);
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: { code: 'unauthorized' } });
  });

  test('the master token with the same requests gets the validation answers', async () => {
    expect((await post('/v1/environments/env_1?action=exec', MASTER, '{"argv":"x"}')).status).toBe(400);
    expect((await post('/v1/environments/..bad..?action=exec', MASTER, '{"argv":["true"]}')).status).toBe(
      404,
    );
  });
});
