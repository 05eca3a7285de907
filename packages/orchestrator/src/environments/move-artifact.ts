import { AGENT_VM_PATHS, SnapshotArtifact } from '@orch/protocol';
import type { AgentClient } from '../hosts/agent-client.js';
import type { MoveRow } from '../store/moves-repo.js';
import type { SnapshotRow } from '../store/snapshots-repo.js';
import { TRANSFER_TIMEOUT_MS, type TravelService } from './travel-service.js';

/*
 * The artifact of a move (`transferring` in MoveService): the live state of the paused VM, written
 * by the source agent and fetched by the target agent, under the move's `artifact_id` on both
 * hosts. This is the agents' side only; MoveService decides when each step runs and records its
 * outcome (the digests, the move's state). Every step may run again after an interruption.
 */

/** A live artifact: its memory state has a digest too. */
export type LiveArtifact = SnapshotArtifact & { readonly state_digest: string };

/**
 * The source writes the live artifact of the paused VM (its saved state decrypted, its disk
 * flattened). Whatever an interrupted attempt left on either host is removed first.
 */
export async function writeLiveArtifact(
  m: MoveRow,
  source: AgentClient,
  target: AgentClient,
): Promise<LiveArtifact> {
  await deleteArtifact(source, m);
  await deleteArtifact(target, m);
  const artifact = await source.json(
    'POST',
    AGENT_VM_PATHS.snapshots(m.environment_id),
    { snapshot_id: m.artifact_id, live: true },
    SnapshotArtifact,
    { timeoutMs: TRANSFER_TIMEOUT_MS },
  );
  if (artifact.kind !== 'live' || !artifact.state_digest)
    throw new Error('the source could not write the live state of the paused VM');
  return { ...artifact, state_digest: artifact.state_digest };
}

/**
 * The target fetches the artifact from the source over the agent protocol, verifying both digests
 * (the same fetch as a cross-host restore's, {@link TravelService.ensureOn}).
 */
export function fetchArtifact(travel: TravelService, m: MoveRow, artifact: LiveArtifact): Promise<void> {
  return travel.ensureOn(
    pseudoSnapshot(m, artifact.digest, artifact.state_digest, artifact.accelerator),
    m.to_host_id,
    m.artifact_id,
  );
}

/** Deletes the move's artifact on one agent (one it does not have counts as deleted). */
export function deleteArtifact(agent: AgentClient, m: MoveRow): Promise<void> {
  return agent.deleteIfPresent(AGENT_VM_PATHS.snapshot(m.artifact_id));
}

/** The moving artifact as a snapshot row, for {@link TravelService.ensureOn} (never stored). */
function pseudoSnapshot(m: MoveRow, digest: string, stateDigest: string, accelerator?: string): SnapshotRow {
  const now = new Date();
  return {
    id: m.artifact_id,
    vm_id: m.environment_id,
    task_id: null,
    host_id: m.from_host_id,
    parent_snapshot_id: null,
    mode: 'move',
    state: 'ready',
    comment: null,
    requested_live: true,
    kind: 'live',
    arch: null,
    digest,
    state_digest: stateDigest,
    accelerator: accelerator ?? null,
    size_bytes: null,
    retention_until: null,
    last_error: null,
    export_ref: null,
    layer_key: null,
    created_at: now,
    updated_at: now,
  };
}
