import {
  clientDeadlineMs,
  Environment,
  parseDestination,
  Snapshot,
  SnapshotList,
  ORCHD_WAIT_SECONDS as W,
} from '@orch/protocol';
import { NoContent } from '../api-client.js';
import { CliError, UsageError } from '../errors.js';
import { ENVIRONMENT_ID, idSegment, SNAPSHOT_ID } from '../ids.js';
import { table } from '../table.js';
import { client } from './client.js';
import { follow } from './environments.js';
import type { OutputMode } from './preview.js';

const snapPath = (id: string) => `/v1/snapshots/${idSegment(SNAPSHOT_ID, id)}`;

function show(s: Snapshot, output: OutputMode): string {
  if (output === 'json') return `${JSON.stringify(s, null, 2)}\n`;
  return (
    table(
      ['ID', 'ENV', 'KIND', 'STATE', 'SIZE', 'DIGEST', 'MODE', 'CREATED'],
      [
        [
          s.id,
          s.vm_id,
          s.kind,
          s.state ?? '-',
          s.size_bytes === undefined ? '-' : String(s.size_bytes),
          s.digest?.slice(0, 12) ?? '-',
          s.mode ?? '-',
          s.created_at,
        ],
      ],
    ) +
    (s.last_error ? `last error: ${s.last_error}\n` : '') +
    (s.exports?.length
      ? `exports:\n${table(
          ['DESTINATION', 'STATUS', 'UPDATED', 'ERROR'],
          s.exports.map((e) => [e.destination, e.status ?? '-', e.updated_at ?? '-', e.last_error ?? '']),
        )}`
      : '') +
    (s.export_ref ? `export ref: ${s.export_ref}\n` : '')
  );
}

/**
 * `orch snapshot export <id> <destination>`: asks orchd to export the snapshot (file:///dir or
 * s3://bucket/prefix), then follows the export until it is `ready` or `error` (unless --detach).
 */
export async function exportSnapshot(
  id: string,
  destination: string,
  opts: { detach?: boolean },
  output: OutputMode,
): Promise<string> {
  const path = snapPath(id);
  const checked = parseDestination(destination);
  if (!checked.ok) throw new UsageError(checked.reason);
  const api = await client();
  let s = await api.call(
    Snapshot,
    'POST',
    `${path}/exports`,
    { destination: checked.value.url },
    { timeoutMs: clientDeadlineMs(W.agentCall) },
  );
  const mine = (x: Snapshot) => x.exports?.filter((e) => e.destination === checked.value.url).at(-1);
  while (!opts.detach && mine(s)?.status === 'pending') {
    await new Promise((r) => setTimeout(r, 500));
    s = await api.call(Snapshot, 'GET', path);
  }
  const e = mine(s);
  if (e?.status === 'error') throw new CliError(`export to ${e.destination} failed: ${e.last_error ?? ''}`);
  return show(s, output);
}

/** `orch snapshot create <env> [--live] ...` */
export async function createSnapshot(
  envId: string,
  opts: {
    live?: boolean;
    comment?: string;
    mode?: string;
    retentionUntil?: string;
    exportTo?: string;
    exportStatus?: string;
  },
  output: OutputMode,
): Promise<string> {
  const path = `/v1/environments/${idSegment(ENVIRONMENT_ID, envId)}/snapshots`;
  if (opts.retentionUntil !== undefined && Number.isNaN(Date.parse(opts.retentionUntil))) {
    throw new UsageError('--retention-until must be a date-time, for example 2026-12-31T00:00:00Z');
  }
  const s = await (await client()).call(
    Snapshot,
    'POST',
    path,
    {
      live: opts.live ?? false,
      ...(opts.comment !== undefined ? { comment: opts.comment } : {}),
      ...(opts.mode !== undefined ? { mode: opts.mode } : {}),
      ...(opts.retentionUntil !== undefined
        ? { retention_until: new Date(opts.retentionUntil).toISOString() }
        : {}),
      ...(opts.exportTo !== undefined ? { export_destination: opts.exportTo } : {}),
      ...(opts.exportStatus !== undefined ? { export_status: opts.exportStatus } : {}),
    },
    // The export destination is checked with the agent, then the agent writes the snapshot.
    { timeoutMs: clientDeadlineMs(W.agentCall + W.snapshot) },
  );
  const note =
    opts.live && s.kind === 'disk' && s.state === 'ready'
      ? 'note: the host could only take a disk snapshot\n'
      : '';
  return show(s, output) + (output === 'json' ? '' : note);
}

export async function getSnapshot(id: string, output: OutputMode): Promise<string> {
  const path = snapPath(id);
  return show(await (await client()).call(Snapshot, 'GET', path), output);
}

export async function listSnapshots(
  filter: { env?: string; task?: string; state?: string },
  output: OutputMode,
): Promise<string> {
  const q = new URLSearchParams({
    ...(filter.env ? { vm_id: filter.env } : {}),
    ...(filter.task ? { task_id: filter.task } : {}),
    ...(filter.state ? { state: filter.state } : {}),
  }).toString();
  const { snapshots } = await (await client()).call(SnapshotList, 'GET', `/v1/snapshots${q ? `?${q}` : ''}`);
  if (output === 'json') return `${JSON.stringify({ snapshots }, null, 2)}\n`;
  if (snapshots.length === 0) return 'no snapshots: take one with `orch snapshot create <env>`\n';
  return table(
    ['ID', 'ENV', 'KIND', 'STATE', 'SIZE', 'CREATED'],
    snapshots.map((s) => [
      s.id,
      s.vm_id,
      s.kind,
      s.state ?? '-',
      s.size_bytes === undefined ? '-' : String(s.size_bytes),
      s.created_at,
    ]),
  );
}

export async function removeSnapshot(id: string, output: OutputMode): Promise<string> {
  const path = snapPath(id);
  await (await client()).call(NoContent, 'DELETE', path, undefined, {
    timeoutMs: clientDeadlineMs(W.agentCall),
  });
  return output === 'json' ? `${JSON.stringify({ deleted: id })}\n` : `deleted ${id}\n`;
}

/** `orch snapshot restore <id>`: a new environment from the snapshot, followed until it runs. */
export async function restoreSnapshot(
  id: string,
  opts: { taskId?: string; detach?: boolean },
  output: OutputMode,
): Promise<string> {
  const path = `${snapPath(id)}/restore`;
  const api = await client();
  // The artifact may be fetched by another host first, then the VM is created there.
  const env = await api.call(Environment, 'POST', path, opts.taskId ? { task_id: opts.taskId } : {}, {
    timeoutMs: clientDeadlineMs(W.transfer + W.agentCall),
  });
  return follow(api, env, opts.detach ?? false, output);
}
