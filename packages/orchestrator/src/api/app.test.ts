import { createLogger } from '@support/server';
import { describe, expect, test } from 'vitest';
import { Authenticator } from '../auth/authenticator.js';
import { CidrAllowlist } from '../auth/cidr-allowlist.js';
import { ConnectionGuard } from '../auth/connection-guard.js';
import type { ApiKeysRepo } from '../store/api-keys-repo.js';
import { buildApp } from './app.js';
import { apiKeyRoutes } from './routes/api-keys.js';
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
  const guard = new ConnectionGuard({}, 5000, logger);
  const hono = buildApp({ auth, allowlist: new CidrAllowlist([]), logger }, [
    ...apiKeyRoutes(unreachable, guard),
    ...environmentRoutes(unreachable, unreachable, unreachable, unreachable, unreachable, guard),
  ]);
  return (path: string, token: string | undefined, body?: string, method = 'POST') =>
    hono.request(path, {
      method,
      headers: {
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        'content-type': 'application/json',
      },
      ...(body !== undefined ? { body } : {}),
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

describe('/v1/api-keys is master-only for every method, routed or not', () => {
  const send = app();
  test.each([
    ['PATCH', '/v1/api-keys'],
    ['PUT', '/v1/api-keys'],
    ['GET', '/v1/api-keys/key_1'],
    ['POST', '/v1/api-keys/key_1'],
    ['GET', '/v1/api-keys/key_1/secret'],
  ])(
    '%s %s: an API key gets 403 unauthorized, the master route_not_found, no token 401',
    async (method, path) => {
      const key = await send(path, KEY, undefined, method);
      expect(key.status).toBe(403);
      expect(await key.json()).toMatchObject({ error: { code: 'unauthorized' } });
      const master = await send(path, MASTER, undefined, method);
      expect(master.status).toBe(404);
      expect(await master.json()).toMatchObject({ error: { code: 'route_not_found' } });
      expect((await send(path, undefined, undefined, method)).status).toBe(401);
    },
  );
});
