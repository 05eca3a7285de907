import { ApiKeyList, agentId, CreateApiKeyRequest, CreatedApiKey, OrchError } from '@orch/protocol';
import { z } from 'zod';
import type { ConnectionGuard } from '../../auth/connection-guard.js';
import type { ApiKeysRepo } from '../../store/api-keys-repo.js';
import { type AnyRoute, route } from '../route.js';

/**
 * `/v1/api-keys` (master only). Without a key store every method answers `unimplemented`. Revoking
 * a key closes at once this orchd's connections opened with it (`guard`); other orchds close theirs
 * at their next re-check.
 */
export function apiKeyRoutes(keys: ApiKeysRepo | undefined, guard: ConnectionGuard): AnyRoute[] {
  const store = (): ApiKeysRepo => {
    if (keys) return keys;
    throw new OrchError(
      'unimplemented',
      'API keys need a database: start orchd with DATABASE_URL (the embedded store keeps no API keys; only the master token is accepted)',
    );
  };
  return [
    route({
      method: 'POST',
      path: '/v1/api-keys',
      access: 'master',
      tag: 'api-keys',
      summary: 'Create an API key; the raw secret is in this answer only',
      body: CreateApiKeyRequest,
      success: { status: 201, schema: CreatedApiKey, description: 'The key, with its secret shown once' },
      handler: async ({ body }) => ({ status: 201, body: await store().create(body.label) }),
    }),
    route({
      method: 'GET',
      path: '/v1/api-keys',
      access: 'master',
      tag: 'api-keys',
      summary: 'List live API keys (never their secrets)',
      success: { status: 200, schema: ApiKeyList, description: 'Live keys, oldest first' },
      handler: async () => ({ status: 200, body: { api_keys: await store().list() } }),
    }),
    route({
      method: 'DELETE',
      path: '/v1/api-keys/{id}',
      access: 'master',
      tag: 'api-keys',
      summary: 'Revoke an API key; every orchd on the database refuses it from the next request',
      params: z.object({ id: agentId() }),
      success: { status: 204, description: 'Revoked' },
      handler: async ({ params }) => {
        if (!(await store().revoke(params.id))) {
          throw new OrchError('not_found', `API key ${JSON.stringify(params.id)} not found`, {
            id: params.id,
          });
        }
        guard.apiKeyRevoked(params.id);
        return { status: 204 };
      },
    }),
  ];
}
