import {
  AGENT_VM_PATHS,
  type CreateSnapshotBody,
  type Environment,
  ORCHD_WAIT_SECONDS,
  OrchError,
  type Snapshot,
  SnapshotArtifact,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { toOrchError } from '../api/errors.js';
import { recordId } from '../crypto/secrets.js';
import type { OrchdMetrics } from '../metrics.js';
import { type SnapshotRow, type SnapshotsRepo, toSnapshot } from '../store/snapshots-repo.js';
import type { Agents } from './agents.js';
import type { EnvironmentService } from './environment-service.js';
import type { ExportService } from './export-service.js';

/**
 * Snapshots of environments. The artifact stays on the agent that took it; the record here says
 * what the agent actually wrote (`kind`, `digest`, `size_bytes`, `arch`). States and transitions are
 * drawn in `@orch/protocol` (snapshots.ts).
 */
export class SnapshotService {
  constructor(
    private readonly repo: SnapshotsRepo,
    private readonly envs: EnvironmentService,
    private readonly logger: Logger,
    private readonly metrics?: OrchdMetrics,
  ) {}

  /** Runs the exports requested at create (set by the server once both exist). */
  exports: ExportService | undefined;

  /** Takes a snapshot of a running environment; `mode` and `export_status` are stored verbatim. */
  async create(envId: string, body: CreateSnapshotBody): Promise<Snapshot> {
    const env = await this.envs.row(envId);
    if (env.state !== 'running') {
      throw new OrchError(
        'conflict',
        `environment ${envId} is ${env.state}; only a running environment can be snapshotted`,
        { state: env.state },
      );
    }
    if (body.export_destination) await this.exports?.check(env.host_id, body.export_destination);
    const taken = await takeSnapshot(
      { agents: this.envs.agents, repo: this.repo, metrics: this.metrics },
      {
        vm_id: env.id,
        task_id: env.task_id,
        host_id: env.host_id,
        parent_snapshot_id: env.restored_from_snapshot_id ?? env.seed_snapshot_id,
        mode: body.mode === '' ? 'manual' : body.mode,
        comment: body.comment ?? null,
        requested_live: body.live,
        retention_until: body.retention_until ? new Date(body.retention_until) : null,
        ...(body.export_destination
          ? {
              export: {
                destination: body.export_destination,
                status: body.export_status === '' ? 'pending' : body.export_status,
              },
            }
          : {}),
      },
      (a) => ({ state_digest: a.state_digest ?? null, accelerator: a.accelerator ?? null }),
    );
    const id = taken.id;
    if (taken.ok) {
      this.logger.info(
        { snapshot: id, env: env.id, kind: taken.artifact.kind, requested_live: body.live },
        'snapshot ready',
      );
    } else {
      this.logger.warn({ snapshot: id, err: taken.error.message }, 'snapshot failed');
    }
    // The answer shows the export as requested (a caller's status verbatim); the exporter's
    // outcome follows on later reads.
    const answer = await this.get(id);
    if (body.export_destination) await this.exports?.afterCreate(id);
    return answer;
  }

  /** `GET /v1/snapshots/{id}`: unknown ids and store failures are both 404 `not_found` (never 500). */
  async get(id: string): Promise<Snapshot> {
    let row: SnapshotRow | undefined;
    let exports: Awaited<ReturnType<SnapshotsRepo['exportsOf']>>;
    try {
      row = await this.repo.get(id);
      exports = await this.repo.exportsOf(row ? [row.id] : []);
    } catch (err) {
      this.logger.warn({ snapshot: id, err: (err as Error).message }, 'snapshot read failed');
      throw OrchError.notFound('snapshot', id);
    }
    if (!row) throw OrchError.notFound('snapshot', id);
    return toSnapshot(row, exports.get(row.id));
  }

  async list(filter: {
    vm_id?: string | undefined;
    task_id?: string | undefined;
    state?: string | undefined;
  }): Promise<Snapshot[]> {
    const rows = await this.repo.list(filter);
    const exports = await this.repo.exportsOf(rows.map((r) => r.id));
    return rows.map((r) => toSnapshot(r, exports.get(r.id)));
  }

  /** Deletes the artifact on its agent (already gone counts as done), then the record. */
  async delete(id: string): Promise<void> {
    const row = await this.repo.get(id);
    if (!row) throw OrchError.notFound('snapshot', id);
    if (!(await this.repo.transition(id, ['ready', 'error', 'deleting'], 'deleting'))) {
      throw new OrchError('conflict', `snapshot ${id} is ${row.state}; wait until it is ready`, {
        state: row.state,
      });
    }
    const hostIds = await this.envs.hostIds();
    try {
      // A host that was removed took its artifact with it: nothing to delete there.
      if (hostIds.includes(row.host_id))
        await (await this.envs.agents.forHost(row.host_id)).deleteIfPresent(AGENT_VM_PATHS.snapshot(id));
    } catch (err) {
      const apiError = toOrchError(err);
      await this.repo.transition(id, ['deleting'], 'deleting', { last_error: apiError.message });
      throw apiError;
    }
    // Copies fetched by other hosts for cross-host restores go too (best effort: a host that does
    // not answer keeps its copy until it is removed).
    for (const host of hostIds) {
      if (host === row.host_id) continue;
      await (await this.envs.agents.forHost(host))
        .json('DELETE', AGENT_VM_PATHS.snapshot(id), undefined, undefined, { timeoutMs: 5000 })
        .catch(() => undefined);
    }
    await this.repo.delete(id);
    this.logger.info({ snapshot: id }, 'snapshot deleted');
  }

  /**
   * A new environment from a snapshot, on the host holding it, with the original environment's
   * request: a `live` snapshot resumes where it stopped, a `disk` one cold-boots.
   */
  async restore(
    id: string,
    body: { task_id?: string | undefined; max_runtime_seconds?: number | undefined },
  ): Promise<Environment> {
    const row = await this.repo.get(id);
    if (!row) throw OrchError.notFound('snapshot', id);
    if (!(await this.repo.transition(id, ['ready'], 'restoring'))) {
      throw new OrchError(
        'conflict',
        `snapshot ${id} is ${row.state}; only a ready snapshot can be restored`,
        { state: row.state },
      );
    }
    const started = performance.now();
    let outcome = 'error';
    try {
      const source = await this.envs.row(row.vm_id);
      const secrets = this.envs.secretsOf(source);
      const restored = await this.envs.create(
        {
          task_id: body.task_id ?? source.task_id,
          spec: {
            ...source.spec,
            ...(body.max_runtime_seconds ? { max_runtime_seconds: body.max_runtime_seconds } : {}),
          },
          manifest_inline: source.manifest_inline,
          startup_script: source.startup_script,
          secrets,
          expose: source.expose,
        },
        { restore: row },
      );
      outcome = 'ok';
      return restored;
    } finally {
      measured(this.metrics, 'restore', row.kind ?? 'disk', outcome, started);
      await this.repo.transition(id, ['restoring'], 'ready');
    }
  }

  /** Deletes snapshots whose `retention_until` has passed. */
  async collectGarbage(now = new Date()): Promise<number> {
    let n = 0;
    for (const row of await this.repo.expired(now)) {
      try {
        await this.delete(row.id);
        n++;
      } catch (err) {
        this.logger.warn(
          { snapshot: row.id, err: (err as Error).message },
          'garbage collection of a snapshot failed',
        );
      }
    }
    return n;
  }
}

/**
 * Takes a snapshot of VM `record.vm_id` on its host `record.host_id`: writes the record
 * `creating`, has the agent write the artifact (`live` as `record.requested_live`), and records
 * the outcome: `ready` with the artifact's kind, digest, arch and size plus `ready(artifact)`'s
 * fields in the same write (a build layer's key arrives with `ready`, never before it), or `error`
 * with the reason, which is answered too. Snapshots of environments and build layers are both
 * taken here, and both count in the `create` snapshot metrics. Throws only when the store fails.
 */
export async function takeSnapshot(
  deps: {
    readonly agents: Agents;
    readonly repo: SnapshotsRepo;
    readonly metrics?: OrchdMetrics | undefined;
  },
  record: Omit<Parameters<SnapshotsRepo['insert']>[0], 'id'>,
  ready: (artifact: SnapshotArtifact) => Parameters<SnapshotsRepo['transition']>[3],
): Promise<{ id: string } & ({ ok: true; artifact: SnapshotArtifact } | { ok: false; error: OrchError })> {
  const id = recordId('snap_');
  await deps.repo.insert({ id, ...record });
  const live = record.requested_live;
  const started = performance.now();
  try {
    const agent = await deps.agents.forHost(record.host_id);
    const artifact = await agent.json(
      'POST',
      AGENT_VM_PATHS.snapshots(record.vm_id),
      { snapshot_id: id, live },
      SnapshotArtifact,
      { timeoutMs: ORCHD_WAIT_SECONDS.snapshot * 1000 },
    );
    await deps.repo.transition(id, ['creating'], 'ready', {
      kind: artifact.kind,
      digest: artifact.digest,
      arch: artifact.arch,
      size_bytes: artifact.size_bytes,
      ...ready(artifact),
    });
    measured(deps.metrics, 'create', artifact.kind, 'ok', started);
    return { id, ok: true, artifact };
  } catch (err) {
    const error = toOrchError(err);
    measured(deps.metrics, 'create', live ? 'live' : 'disk', 'error', started);
    await deps.repo.transition(id, ['creating'], 'error', { last_error: error.message });
    return { id, ok: false, error };
  }
}

function measured(
  metrics: OrchdMetrics | undefined,
  operation: 'create' | 'restore',
  kind: string,
  outcome: string,
  started: number,
): void {
  metrics?.snapshotOperations.inc({ operation, kind, outcome });
  metrics?.snapshotDuration.observe({ operation, kind }, (performance.now() - started) / 1000);
}
