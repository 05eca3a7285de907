import { HOST_ID } from '@orch/protocol';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { OrchdProcess, tempDataDir } from './orchd-process.js';

const data = tempDataDir();
let orchd: OrchdProcess;
beforeAll(async () => {
  orchd = await OrchdProcess.start({ ORCH_DATA_DIR: data.dir, ORCH_AUTH_TOKEN: 'm' });
});
afterAll(async () => {
  await orchd?.stop();
  data.cleanup();
});

test('GET /v1/openapi.json describes every route, with the schemas the server validates with', async () => {
  const r = await orchd.request('GET', '/v1/openapi.json');
  expect(r.status).toBe(200);
  const doc = r.body as {
    openapi: string;
    paths: Record<
      string,
      Record<
        string,
        {
          requestBody?: {
            content: Record<
              string,
              { schema: { properties: object; required: string[]; additionalProperties: boolean } }
            >;
          };
          'x-access': string;
        }
      >
    >;
  };
  expect(doc.openapi).toBe('3.0.3');
  const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
  );
  expect(routes.sort()).toEqual(
    [
      'POST /login',
      'POST /logout',
      'GET /metrics',
      'GET /v1/events',
      'POST /v1/hosts',
      'GET /v1/hosts',
      'GET /v1/hosts/{id}',
      'GET /v1/hosts/{id}/capacity',
      'POST /v1/hosts/{id}',
      'DELETE /v1/hosts/{id}',
      'POST /v1/api-keys',
      'GET /v1/api-keys',
      'DELETE /v1/api-keys/{id}',
      'GET /v1/openapi.json',
      'GET /v1/info',
      'POST /v1/environments',
      'GET /v1/environments',
      'GET /v1/environments/{id}',
      'GET /v1/environments/{id}/attach',
      'GET /v1/environments/{id}/logs',
      'DELETE /v1/environments/{id}',
      'POST /v1/environments/{id}',
      'POST /v1/environments/{id}/snapshots',
      'GET /v1/snapshots',
      'GET /v1/snapshots/{snapshotId}',
      'DELETE /v1/snapshots/{snapshotId}',
      'POST /v1/snapshots/{snapshotId}/restore',
      'POST /v1/snapshots/{snapshotId}/exports',
      'GET /v1/moves',
      'POST /v1/builds',
      'GET /v1/builds',
      'GET /v1/builds/{id}',
    ].sort(),
  );
  // Path ids are documented with the pattern the server checks.
  const hostParam = (doc.paths['/v1/hosts/{id}']!.get as unknown as { parameters: { schema: object }[] })
    .parameters[0]!;
  expect(hostParam.schema).toMatchObject({ type: 'string', pattern: HOST_ID.source });
  const register = doc.paths['/v1/hosts']!.post!;
  expect(register['x-access']).toBe('master');
  const ref = (register.requestBody!.content['application/json']!.schema as unknown as { $ref: string }).$ref;
  expect(ref).toBe('#/components/schemas/RegisterHostRequest');
  const schema = (doc as unknown as { components: { schemas: Record<string, typeof register.requestBody> } })
    .components.schemas.RegisterHostRequest as unknown as {
    properties: object;
    required: string[];
    additionalProperties: boolean;
  };
  expect(Object.keys(schema.properties).sort()).toEqual(['agent_token', 'agent_url', 'id', 'kind', 'labels']);
  expect(schema.required.sort()).toEqual(['agent_url', 'kind']);
  expect(schema.additionalProperties).toBe(false);
});
