// `orch logs`: an environment's startup log, or one of its services' logs.
import type { Command } from 'commander';
import type { ExitStatus } from './output.js';

/** Declares `orch logs <env> [service] [-f] [--tail <bytes>]`. */
export function addLogs(program: Command, exit: ExitStatus): void {
  program
    .command('logs')
    .description(
      "Print an environment's startup log (the startup script's output), or one service's log (its stdout and stderr)",
    )
    .argument('<env>', 'environment id')
    .argument('[service]', "a service of the environment's manifest (default: the startup log)")
    .option('-f, --follow', 'keep printing new output until the environment stops')
    .option('--tail <bytes>', 'start with the last N bytes')
    .action(async (id: string, service: string | undefined, opts: { follow?: boolean; tail?: string }) => {
      exit.code = await (await import('../commands/logs.js')).showLogs(id, {
        ...opts,
        ...(service !== undefined ? { service } : {}),
      });
    });
}
