// `orch snapshot`: snapshots of environments.
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { printing } from './output.js';

const snapshots = () => import('../commands/snapshots.js');

/** Declares `orch snapshot create|get|list|rm|export|restore`. */
export function addSnapshot(program: Command): void {
  const snapshot = program.command('snapshot').description('Take, inspect, restore and delete snapshots');
  snapshot
    .command('create')
    .description('Snapshot a running environment (disk; with --live also memory)')
    .argument('<env>', 'environment id')
    .option('--live', 'also save memory and CPU state, so a restore resumes where it stopped')
    .option('--comment <text>', 'a note kept with the snapshot')
    .option('--mode <mode>', 'stored verbatim (default manual)')
    .option('--retention-until <date-time>', 'garbage-collect the snapshot after this time')
    .option('--export-to <destination>', 'record an export request to this destination')
    .option('--export-status <status>', 'status of that export, stored verbatim (default pending)')
    .action(
      printing(async (id: string, opts: Record<string, string | boolean>, mode: OutputMode) =>
        (await snapshots()).createSnapshot(id, opts, mode),
      ),
    );
  snapshot
    .command('get')
    .description('Show one snapshot')
    .argument('<snapshot>', 'snapshot id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await snapshots()).getSnapshot(id, mode),
      ),
    );
  snapshot
    .command('list')
    .description('List snapshots, newest first')
    .option('--env <env>', 'only of this environment')
    .option('--task <task-id>', 'only of this task')
    .option('--state <state>', 'only in this state')
    .action(
      printing(async (opts: { env?: string; task?: string; state?: string }, mode: OutputMode) =>
        (await snapshots()).listSnapshots(opts, mode),
      ),
    );
  snapshot
    .command('rm')
    .description('Delete a snapshot')
    .argument('<snapshot>', 'snapshot id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await snapshots()).removeSnapshot(id, mode),
      ),
    );
  snapshot
    .command('export')
    .description('Export a snapshot to file:///dir or s3://bucket/prefix, verified by its digest')
    .argument('<snapshot>', 'snapshot id')
    .argument(
      '<destination>',
      "file:///absolute/dir or s3://bucket/prefix (S3 endpoint and keys: the agent's configuration)",
    )
    .option('--detach', 'do not wait for the export to be ready')
    .action(
      printing(async (id: string, destination: string, opts: { detach?: boolean }, mode: OutputMode) =>
        (await snapshots()).exportSnapshot(id, destination, opts, mode),
      ),
    );
  snapshot
    .command('restore')
    .description('Start a new environment from a snapshot (live: resumes; disk: cold-boots)')
    .argument('<snapshot>', 'snapshot id')
    .option('--task-id <id>', 'task id of the new environment (default: the original one)')
    .option('--detach', 'do not wait for it to run')
    .action(
      printing(async (id: string, opts: { taskId?: string; detach?: boolean }, mode: OutputMode) =>
        (await snapshots()).restoreSnapshot(id, opts, mode),
      ),
    );
}
