import { Build, BuildIdParam, BuildList, BuildListQuery, CreateBuildRequest } from '@orch/protocol';
import type { BuildService } from '../../builds/build-service.js';
import { type AnyRoute, route } from '../route.js';

/** `/v1/builds`: start a build (its layers are snapshots with `layer_key`), read builds. */
export function buildRoutes(builds: BuildService): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/v1/builds',
      access: 'authenticated',
      tag: 'builds',
      summary:
        'Build the setup lines into layers (one disk snapshot per line, keyed by layer_key); cached layers are reused and boot nothing',
      body: CreateBuildRequest,
      success: {
        status: 201,
        schema: Build,
        description:
          'The build with every step and its layer key: running (follow it with GET /v1/builds/{id}), or ready at once when every layer was cached',
      },
      handler: async ({ body }) => ({ status: 201, body: await builds.create(body) }),
    }),
    route({
      method: 'GET',
      path: '/v1/builds',
      access: 'authenticated',
      tag: 'builds',
      summary: 'List builds, newest first (filters: task_id, state)',
      query: BuildListQuery,
      success: { status: 200, schema: BuildList, description: 'Builds' },
      handler: async ({ query }) => ({ status: 200, body: { builds: await builds.list(query) } }),
    }),
    route({
      method: 'GET',
      path: '/v1/builds/{id}',
      access: 'authenticated',
      tag: 'builds',
      summary: 'Read one build: its state, steps (cached, running, built, failed) and artifact snapshot id',
      params: BuildIdParam,
      success: { status: 200, schema: Build, description: 'The build' },
      handler: async ({ params }) => ({ status: 200, body: await builds.get(params.id) }),
    }),
  ];
}
