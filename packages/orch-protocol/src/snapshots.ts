import { z } from 'zod';
import { MAX_RUNTIME_SECONDS } from './agent-vms.js';
import { agentId, taskId, text } from './text.js';
import { destination } from './transfer.js';

/**
 * Snapshot states (orchestrator.md lists the values; the transitions are ours):
 *
 *   creating --agent wrote it--> ready --restore requested--> restoring --VM started--> ready
 *      |                          |  \--DELETE or retention_until passed--> deleting --> (row removed)
 *      +--agent failed--> error --DELETE / retention--^
 */
export const SNAPSHOT_STATES = ['creating', 'ready', 'restoring', 'deleting', 'error'] as const;
export type SnapshotState = (typeof SNAPSHOT_STATES)[number];

/** SnapshotExport (orchestrator.md): `status` is stored verbatim; only an empty value becomes `pending`. */
export const SnapshotExport = z
  .object({
    destination: z.string(),
    status: z.string().optional(),
    requested_at: z.iso.datetime().optional(),
    updated_at: z.iso.datetime().optional(),
    last_error: z.string().optional(),
  })
  .meta({ id: 'SnapshotExport' });

/** Snapshot, field by field as orchestrator.md's table: optional fields are omitted when unset; `kind` always present. */
export const Snapshot = z
  .object({
    id: z.string(),
    vm_id: z.string(),
    task_id: z.string().optional(),
    tenant_id: z.string().optional(),
    parent_snapshot_id: z.string().optional(),
    mode: z.string().optional(),
    state: z.enum(SNAPSHOT_STATES).optional(),
    comment: z.string().optional(),
    layer_key: z.string().optional(),
    arch: z.enum(['amd64', 'arm64']).optional(),
    digest: z.string().optional(),
    kind: z.enum(['disk', 'live']),
    size_bytes: z.number().int().optional(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime().optional(),
    retention_until: z.iso.datetime().nullable().optional(),
    last_error: z.string().optional(),
    export_ref: z.string().optional(),
    exports: z.array(SnapshotExport).optional(),
  })
  .meta({ id: 'Snapshot' });
export type Snapshot = z.infer<typeof Snapshot>;

export const SnapshotList = z.object({ snapshots: z.array(Snapshot) }).meta({ id: 'SnapshotList' });

/**
 * `POST /v1/environments/{id}/snapshots`. `mode` and `export_status` are open strings stored
 * verbatim (empty: `manual`, `pending`); `export_destination` records an export request, and
 * `export_status` is that export's status: without a destination there is nothing to store it on,
 * so it is refused rather than dropped.
 */
export const CreateSnapshotBody = z
  .strictObject({
    live: z.boolean().default(false),
    mode: text(64).default(''),
    comment: text(1024).optional(),
    retention_until: z.iso.datetime({ offset: true }).nullable().optional(),
    export_destination: destination().optional(),
    export_status: text(64).default(''),
  })
  .check((ctx) => {
    if (ctx.value.export_status !== '' && ctx.value.export_destination === undefined)
      ctx.issues.push({
        code: 'custom',
        message: 'needs export_destination (the status of an export requested at create)',
        input: ctx.value.export_status,
        path: ['export_status'],
      });
  })
  .meta({ id: 'CreateSnapshotBody' });
export type CreateSnapshotBody = z.infer<typeof CreateSnapshotBody>;

export const SnapshotListQuery = z.strictObject({
  vm_id: agentId().optional(),
  task_id: text(128).optional(),
  state: z.enum(SNAPSHOT_STATES).optional(),
});

/** `POST /v1/snapshots/{id}/restore`: a new environment from the snapshot. */
export const RestoreSnapshotBody = z
  .strictObject({
    task_id: taskId().optional(),
    max_runtime_seconds: z.number().int().min(1).max(MAX_RUNTIME_SECONDS).optional(),
  })
  .meta({ id: 'RestoreSnapshotBody' });

/** `POST /v1/snapshots/{id}/exports`: export a ready snapshot to `destination` (file:///dir or s3://bucket/prefix). */
export const CreateSnapshotExportBody = z
  .strictObject({ destination: destination() })
  .meta({ id: 'CreateSnapshotExportBody' });
