import { z } from 'zod';
import { Host } from './hosts.js';
import { agentId, hostId } from './text.js';

/**
 * Moves of running environments between hosts (a host drain). One move:
 *
 *   planned --claimed--> pausing --source paused--> transferring --target has the artifact-->
 *   restoring --target VM running--> done
 *      any step fails --> rolling_back --source VM resumed--> rolled_back
 *
 * `rolling_back` is retried (by the reconciler of any orchd) until the source agent answers, so a
 * move never leaves an environment without a running VM on purpose, and the environment record is
 * never removed by a move. `downtime_ms`: from the pause on the source to the VM running on the
 * target.
 */
export const MOVE_STATES = [
  'planned',
  'pausing',
  'transferring',
  'restoring',
  'done',
  'rolling_back',
  'rolled_back',
] as const;
export type MoveState = (typeof MOVE_STATES)[number];
/** States a move does not leave. */
export const FINAL_MOVE_STATES: readonly MoveState[] = ['done', 'rolled_back'];

export const EnvironmentMove = z
  .object({
    id: z.string(),
    environment_id: z.string(),
    from_host_id: z.string(),
    to_host_id: z.string(),
    state: z.enum(MOVE_STATES),
    /** Why it rolled back (or the last failure of a step being retried). */
    reason: z.string().nullable(),
    downtime_ms: z.number().int().nullable(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'EnvironmentMove' });
export type EnvironmentMove = z.infer<typeof EnvironmentMove>;

export const MoveList = z.object({ moves: z.array(EnvironmentMove) }).meta({ id: 'MoveList' });

export const MoveListQuery = z.strictObject({
  host_id: hostId().optional(),
  environment_id: agentId().optional(),
});

/** `POST /v1/hosts/{id}?action=drain`: the host (cordoned), the moves started, what cannot move and why. */
export const HostDrain = z
  .object({
    host: Host,
    moves: z.array(EnvironmentMove),
    unmovable: z.array(z.object({ environment_id: z.string(), state: z.string(), reason: z.string() })),
  })
  .meta({ id: 'HostDrain' });
export type HostDrain = z.infer<typeof HostDrain>;
