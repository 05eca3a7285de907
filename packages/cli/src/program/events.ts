// `orch events`: follow the orchestrator's event stream.
import { EVENT_KINDS } from '@orch/protocol/rules';
import type { Command } from 'commander';
import type { ExitStatus } from './output.js';

/** Declares `orch events`; its exit status becomes `exit.code`. */
export function addEvents(program: Command, exit: ExitStatus): void {
  program
    .command('events')
    .description(
      `Follow the events of ${EVENT_KINDS.join(', ')} records (GET /v1/events), one JSON line each; resumes after a dropped connection`,
    )
    .option('--after <id>', 'start after this event id (default: only new events)')
    .option(
      '--type <prefix>',
      `only events whose type starts with this: a kind (${EVENT_KINDS.join(', ')}) or a type (host.updated)`,
    )
    .action(async (opts: { after?: string; type?: string }) => {
      exit.code = await (await import('../commands/events.js')).followEvents(opts);
    });
}
