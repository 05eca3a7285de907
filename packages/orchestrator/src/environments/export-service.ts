import { OrchError, parseDestination, type Snapshot } from '@orch/protocol';
import type { Logger } from '@support/server';
import { toOrchError } from '../api/errors.js';
import type { SnapshotRow, SnapshotsRepo } from '../store/snapshots-repo.js';
import type { TravelService } from './travel-service.js';

/** A `pending` export untouched for this long was interrupted (its orchd stopped): it is run again. */
const STALE_EXPORT_MS = 600_000;

/**
 * Exports of snapshots (orchestrator.md SnapshotExport). An export request is a row with the
 * caller's `status` (stored verbatim; empty means `pending`); the exporter then asks the agent that
 * holds the snapshot to copy the artifact to the destination and verify it there, and records its
 * outcome over whatever status was stored: `ready` (with `export_ref`, and the snapshot's own
 * `export_ref` when it had none) or `error` with `last_error`. Runs in the background; an
 * interrupted one (orchd stopped) is run again by the reconciler ({@link retryStale}).
 */
export class ExportService {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly repo: SnapshotsRepo,
    private readonly travel: TravelService,
    private readonly logger: Logger,
  ) {}

  /** `POST /v1/snapshots/{id}/exports`: the snapshot must be `ready`; answers it with the new export `pending`. */
  async request(
    snapshotId: string,
    destination: string,
    read: (id: string) => Promise<Snapshot>,
  ): Promise<Snapshot> {
    const row = await this.repo.get(snapshotId);
    if (!row) throw OrchError.notFound('snapshot', snapshotId);
    const dest = parseDestination(destination);
    if (!dest.ok) throw OrchError.invalid(`destination: ${dest.reason}`, { field: 'destination' });
    if (row.state !== 'ready' && row.state !== 'restoring')
      throw new OrchError(
        'conflict',
        `snapshot ${snapshotId} is ${row.state}; only a ready snapshot can be exported`,
        {
          state: row.state,
        },
      );
    await this.travel.checkDestination(row.host_id, dest.value.url);
    const exportId = await this.repo.addExport(snapshotId, dest.value.url, 'pending');
    this.start(row, exportId, dest.value.url);
    return read(snapshotId);
  }

  /**
   * Before a snapshot with `export_destination` is taken on `hostId`: the agent must accept the
   * destination (`400` from it otherwise, and nothing is taken or recorded).
   */
  async check(hostId: string, destination: string): Promise<void> {
    await this.travel.checkDestination(hostId, destination);
  }

  /** After a snapshot was written: runs the exports requested with it (`export_destination`). */
  async afterCreate(snapshotId: string): Promise<void> {
    const row = await this.repo.get(snapshotId);
    if (!row) return;
    for (const exp of await this.repo.exportRows(snapshotId)) {
      if (row.state === 'ready') this.start(row, exp.id, exp.destination);
      else
        await this.repo.settleExport(exp.id, {
          status: 'error',
          last_error: `the snapshot was not written: ${row.last_error ?? row.state}`,
        });
    }
  }

  /** Runs one export in the background. */
  start(row: SnapshotRow, exportId: number, destination: string): void {
    const task = this.run(row, exportId, destination).finally(() => this.running.delete(task));
    this.running.add(task);
  }

  private async run(row: SnapshotRow, exportId: number, destination: string): Promise<void> {
    try {
      const result = await this.travel.exportOnce(row, destination);
      await this.repo.settleExport(exportId, { status: 'ready', export_ref: result.export_ref });
      this.logger.info(
        { snapshot: row.id, export_ref: result.export_ref, ms: result.duration_ms },
        'export ready',
      );
    } catch (err) {
      const e = toOrchError(err);
      await this.repo
        .settleExport(exportId, { status: 'error', last_error: e.message })
        .catch((dbErr: unknown) =>
          this.logger.warn({ err: (dbErr as Error).message }, 'export status not recorded'),
        );
      this.logger.warn({ snapshot: row.id, destination, err: e.message }, 'export failed');
    }
  }

  /** Exports left `pending` by a stopped orchd: run again (reconciler). */
  async retryStale(now = new Date()): Promise<number> {
    const stale = await this.repo.claimStaleExports(new Date(now.getTime() - STALE_EXPORT_MS));
    for (const exp of stale) {
      const row = await this.repo.get(exp.snapshot_id);
      if (row?.state === 'ready') this.start(row, exp.id, exp.destination);
    }
    return stale.length;
  }

  /** Waits for the exports under way (orchd stop). */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}
