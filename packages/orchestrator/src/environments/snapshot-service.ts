import {
  AGENT_VM_PATHS,
  type CreateSnapshotBody,
  type Environment,
  OrchError,
  type Snapshot,
  SnapshotArtifact,
} from '@orch/protocol';
import type { Logger } from 'pino';
import { toOrchError } from '../api/errors.js';
import { randomId } from '../crypto/secrets.js';
import { AgentCallError } from '../hosts/agent-client.js';
import type { OrchdMetrics } from '../metrics.js';
import { type SnapshotRow, type SnapshotsRepo, toSnapshot } from '../store/snapshots-repo.js';
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
    const id = randomId('snap_', 12).replace(/[^A-Za-z0-9_-]/g, '');
    await this.repo.insert({
      id,
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
    });
    const started = performance.now();
    try {
      const agent = await this.envs.agents.forHost(env.host_id);
      const artifact = await agent.json(
        'POST',
        AGENT_VM_PATHS.snapshots(env.id),
        { snapshot_id: id, live: body.live },
        SnapshotArtifact,
        { timeoutMs: 600_000 },
      );
      await this.repo.transition(id, ['creating'], 'ready', {
        kind: artifact.kind,
        digest: artifact.digest,
        arch: artifact.arch,
        size_bytes: artifact.size_bytes,
        state_digest: artifact.state_digest ?? null,
        accelerator: artifact.accelerator ?? null,
      });
      this.measured('create', artifact.kind, 'ok', started);
      this.logger.info(
        { snapshot: id, env: env.id, kind: artifact.kind, requested_live: body.live },
        'snapshot ready',
      );
    } catch (err) {
      const apiError = toOrchError(err);
      this.measured('create', body.live ? 'live' : 'disk', 'error', started);
      await this.repo.transition(id, ['creating'], 'error', { last_error: apiError.message });
      this.logger.warn({ snapshot: id, err: apiError.message }, 'snapshot failed');
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
        await (await this.envs.agents.forHost(row.host_id)).json('DELETE', AGENT_VM_PATHS.snapshot(id));
    } catch (err) {
      if (!(err instanceof AgentCallError && err.kind === 'not_found')) {
        const apiError = toOrchError(err);
        await this.repo.transition(id, ['deleting'], 'deleting', { last_error: apiError.message });
        throw apiError;
      }
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
      this.measured('restore', row.kind ?? 'disk', outcome, started);
      await this.repo.transition(id, ['restoring'], 'ready');
    }
  }

  private measured(operation: 'create' | 'restore', kind: string, outcome: string, started: number): void {
    this.metrics?.snapshotOperations.inc({ operation, kind, outcome });
    this.metrics?.snapshotDuration.observe({ operation, kind }, (performance.now() - started) / 1000);
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
