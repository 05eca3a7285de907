import { createHmac } from 'node:crypto';
import {
  DestinationCheck,
  type Host,
  ORCHD_WAIT_SECONDS,
  OrchError,
  SnapshotArtifact,
  SnapshotExportResult,
  TRANSFER_PATHS,
  transferGrantMessage,
} from '@orch/protocol';
import type { Logger } from '@support/server';
import { toOrchError } from '../api/errors.js';
import { AgentCallError } from '../hosts/agent-client.js';
import type { SnapshotRow, SnapshotsRepo } from '../store/snapshots-repo.js';
import type { Agents } from './agents.js';

/** How long an agent may take to export or fetch an artifact (GiBs of disk and memory). */
export const TRANSFER_TIMEOUT_MS = ORCHD_WAIT_SECONDS.transfer * 1000;

/**
 * Snapshots travel between hosts (orchd's side): exports of a snapshot by the agent that holds it,
 * and making an artifact present on another host before a restore or a from-build seed there.
 */
export class TravelService {
  constructor(
    private readonly repo: SnapshotsRepo,
    private readonly agents: Agents,
    private readonly logger: Logger,
  ) {}

  /**
   * Whether a snapshot's artifact may start on `host` (portability rules): the same architecture
   * for any snapshot (a rootfs does not boot across architectures), and for a `live` one the same
   * accelerator too (its vCPU state is the accelerator's). The target agent checks the rest
   * (QEMU version, guest kernel) and refuses with `409 conflict` before anything boots.
   */
  portableTo(row: SnapshotRow, host: Host): string | undefined {
    if (row.arch && host.arch !== row.arch) return `${host.id} is ${host.arch}, the snapshot ${row.arch}`;
    if (row.kind === 'live' && row.accelerator && host.accelerator !== row.accelerator)
      return `${host.id} runs ${host.accelerator}; the live snapshot was taken under ${row.accelerator}`;
    return undefined;
  }

  /**
   * Makes host `target` hold snapshot `row`'s artifact, verified by its digests: nothing when it
   * is the host that took it or already has it; else the target fetches it from the source agent
   * over the agent protocol, or, when that agent cannot serve it, from a `ready` export.
   */
  async ensureOn(row: SnapshotRow, target: string, artifactId = row.id): Promise<void> {
    if (target === row.host_id && artifactId === row.id) return;
    if (!row.digest)
      throw new OrchError(
        'conflict',
        `snapshot ${row.id} has no digest: it cannot be verified on another host`,
      );
    const agent = await this.agents.forHost(target);
    const base = { digest: row.digest, ...(row.state_digest ? { state_digest: row.state_digest } : {}) };
    const failures: string[] = [];
    try {
      const source = await this.agents.credentials(row.host_id);
      await agent.json(
        'POST',
        TRANSFER_PATHS.snapshotFetch(artifactId),
        {
          ...base,
          source: { agent_url: source.url, grant: transferGrant(source.token, row.id), snapshot_id: row.id },
        },
        SnapshotArtifact,
        { timeoutMs: TRANSFER_TIMEOUT_MS },
      );
      this.logger.info({ snapshot: row.id, from: row.host_id, to: target }, 'artifact fetched from its host');
      return;
    } catch (err) {
      const e = toOrchError(err);
      // A digest mismatch or a refusal by the target is the answer; an unreachable source is not.
      if (e.code === 'conflict' || e.code === 'invalid_argument' || isTargetDown(err)) throw e;
      failures.push(`from host ${row.host_id}: ${e.message}`);
    }
    for (const exp of await this.repo.exportRows(row.id)) {
      if (exp.status !== 'ready' || !exp.export_ref) continue;
      try {
        await agent.json(
          'POST',
          TRANSFER_PATHS.snapshotFetch(artifactId),
          { ...base, source: { export_ref: exp.export_ref } },
          SnapshotArtifact,
          { timeoutMs: TRANSFER_TIMEOUT_MS },
        );
        this.logger.info(
          { snapshot: row.id, from: exp.export_ref, to: target },
          'artifact fetched from an export',
        );
        return;
      } catch (err) {
        const e = toOrchError(err);
        if (isTargetDown(err)) throw e;
        failures.push(`from ${exp.export_ref}: ${e.message}`);
      }
    }
    const digestRefusal = failures.find((f) => f.includes('does not match its digest'));
    throw new OrchError(
      digestRefusal ? 'conflict' : 'unavailable',
      `snapshot ${row.id} cannot be brought to host ${target}: ${failures.join('; ') || 'its host does not serve it and it has no ready export'}`,
      { snapshot_id: row.id, ...(digestRefusal ? { reason: 'digest_mismatch' } : {}) },
    );
  }

  /**
   * Asks the agent of `hostId` whether it would export to `destination`, before anything is
   * recorded: a `file://` destination outside its export roots (or an `s3://` one without its S3
   * keys) is its `400 invalid_argument`, answered at the request instead of a later `error` export.
   */
  async checkDestination(hostId: string, destination: string): Promise<void> {
    const agent = await this.agents.forHost(hostId);
    await agent.json('POST', TRANSFER_PATHS.destinationCheck(), { destination }, DestinationCheck);
  }

  /** The agent holding snapshot `row` exports it to `destination` (verified there); its answer. */
  async exportOnce(row: SnapshotRow, destination: string): Promise<SnapshotExportResult> {
    const agent = await this.agents.forHost(row.host_id);
    return agent.json('POST', TRANSFER_PATHS.snapshotExport(row.id), { destination }, SnapshotExportResult, {
      timeoutMs: TRANSFER_TIMEOUT_MS,
    });
  }
}

/** The target agent itself cannot be reached (nothing else will work). */
function isTargetDown(err: unknown): boolean {
  return err instanceof AgentCallError && err.kind === 'unreachable';
}

/**
 * A transfer grant for snapshot `snapshotId`'s files on the agent whose token is `token`, valid for
 * as long as a transfer may take: what the target agent gets instead of that token (see
 * `TRANSFER_GRANT_HEADER` of @orch/protocol).
 */
export function transferGrant(token: string, snapshotId: string, nowMs = Date.now()): string {
  const expires = Math.floor(nowMs / 1000) + Math.ceil(TRANSFER_TIMEOUT_MS / 1000) + 60;
  const mac = createHmac('sha256', token).update(transferGrantMessage(snapshotId, expires)).digest('hex');
  return `${expires}.${mac}`;
}
