import type { AgentVmState } from './agent-vms.js';
import type { EnvironmentState } from './environments.js';
import type { SnapshotState } from './snapshots.js';

/** A state machine as data: for each state, the states it may move to. */
export type TransitionTable<S extends string> = Readonly<Record<S, readonly S[]>>;

/**
 * Environment lifecycle (the orchestrator's record):
 *
 *   creating --agent: running--> running --DELETE--> stopping --agent: gone--> stopped
 *     |  \--DELETE-------------------------------------^           ^
 *     |                             |  \--max runtime ran out / VM stopped--+
 *     +--agent failed, timed out,   +--VM crashed or vanished--> error
 *        refused, VM gone or stopped--> error
 *
 *   running --?action=pause--> pausing --agent: paused--> paused --?action=resume--> resuming
 *      ^  ^----agent: still running (pause failed)--+                                   |
 *      +--------------------------agent: running----------------------------------------+
 *   resuming --agent: still paused (resume refused, e.g. no capacity)--> paused
 *   pausing, paused, resuming --DELETE--> stopping;  --VM gone / failed--> error
 *
 * `stopped` and `error` are final. CPU and RAM are held in every state but `paused`, `stopped` and
 * `error`; `paused` holds only disk.
 */
export const ENVIRONMENT_TRANSITIONS: TransitionTable<EnvironmentState> = {
  creating: ['running', 'stopping', 'error'],
  running: ['pausing', 'stopping', 'stopped', 'error'],
  pausing: ['paused', 'running', 'stopping', 'stopped', 'error'],
  paused: ['resuming', 'stopping', 'stopped', 'error'],
  resuming: ['running', 'paused', 'stopping', 'stopped', 'error'],
  stopping: ['stopped'],
  stopped: [],
  error: [],
};

/**
 * Snapshot lifecycle:
 *
 *   creating --agent wrote it--> ready --restore--> restoring --VM started or failed--> ready
 *      |                          |
 *      +--agent failed--> error   +--DELETE / retention passed--> deleting --> (row removed)
 *                           \--DELETE / retention passed--------^   ^--retry--+
 *
 * `deleting` may be entered again (a retried delete records its last error there).
 */
export const SNAPSHOT_TRANSITIONS: TransitionTable<SnapshotState> = {
  creating: ['ready', 'error'],
  ready: ['restoring', 'deleting'],
  restoring: ['ready'],
  error: ['deleting'],
  deleting: ['deleting'],
};

/**
 * VM lifecycle on an agent:
 *
 *   creating --guest ready--> running --DELETE / max runtime--> stopping --> stopped
 *       |  \--DELETE during boot--------------------------------^      \--> error
 *       +--boot failed--> error  +--QEMU died--> error
 *                                |
 *                                +--pause / agent stop--> pausing --state saved--> paused
 *                                ^   (save failed: back to running) |                  |
 *                                +--guest answers-- resuming <--resume / agent start--+
 *                                                      +--restore failed--> error
 *
 * `pausing`, `paused` and `resuming` may also end in `stopped` (DELETE) or `error` (QEMU died);
 * an agent that died mid-resume finds the VM `paused` again (its saved state is intact).
 * After an agent restart a VM whose QEMU still runs is re-adopted (`running`); one whose QEMU is
 * gone (`creating`, `running`, `stopping`) is `error`. `stopped` and `error` are final.
 */
export const AGENT_VM_TRANSITIONS: TransitionTable<AgentVmState> = {
  creating: ['running', 'stopping', 'stopped', 'error'],
  running: ['stopping', 'stopped', 'error', 'pausing'],
  pausing: ['paused', 'running', 'stopped', 'error'],
  paused: ['resuming', 'stopped', 'error'],
  resuming: ['running', 'paused', 'stopped', 'error'],
  stopping: ['stopped', 'error'],
  stopped: [],
  error: [],
};

/** Whether the table allows `from` -> `to`. */
export function canTransition<S extends string>(table: TransitionTable<S>, from: S, to: S): boolean {
  return table[from]?.includes(to) ?? false;
}

/**
 * The states of `from` that may move to `to`, throwing when a caller names a move the table does
 * not allow (a bug: the diagram and the code disagree). Repositories call this before every
 * conditional state update.
 *
 * @example
 * allowedSources(ENVIRONMENT_TRANSITIONS, ['creating', 'running'], 'error') // ['creating', 'running']
 * allowedSources(ENVIRONMENT_TRANSITIONS, ['stopped'], 'error')            // throws
 */
export function allowedSources<S extends string>(table: TransitionTable<S>, from: readonly S[], to: S): S[] {
  const illegal = from.filter((f) => !canTransition(table, f, to));
  if (illegal.length > 0) {
    throw new Error(`illegal state transition: ${illegal.join(', ')} -> ${to}`);
  }
  return [...from];
}
