import { agentId, CreateSnapshotExportBody, MoveList, MoveListQuery, Snapshot } from '@orch/protocol';
import { z } from 'zod';
import type { ExportService } from '../../environments/export-service.js';
import type { MoveService } from '../../environments/move-service.js';
import type { SnapshotService } from '../../environments/snapshot-service.js';
import { type AnyRoute, route } from '../route.js';

const SnapshotIdParam = z.object({ snapshotId: agentId() });

/** Snapshots travel: exports after create, and the moves of host drains. */
export function travelRoutes(
  snapshots: SnapshotService,
  exports: ExportService,
  moves: MoveService,
): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/v1/snapshots/{snapshotId}/exports',
      access: 'authenticated',
      tag: 'snapshots',
      summary:
        'Export a ready snapshot to file:///dir or s3://bucket/prefix (runs in the background: pending -> ready | error)',
      params: SnapshotIdParam,
      body: CreateSnapshotExportBody,
      success: { status: 201, schema: Snapshot, description: 'The snapshot with the new export (pending)' },
      handler: async ({ params, body }) => ({
        status: 201,
        body: await exports.request(params.snapshotId, body.destination, (id) => snapshots.get(id)),
      }),
    }),
    route({
      method: 'GET',
      path: '/v1/moves',
      access: 'authenticated',
      tag: 'hosts',
      summary:
        'Moves of environments between hosts (host drains), newest first; filters host_id, environment_id',
      query: MoveListQuery,
      success: { status: 200, schema: MoveList, description: 'Moves' },
      handler: async ({ query }) => ({ status: 200, body: { moves: await moves.list(query) } }),
    }),
  ];
}
