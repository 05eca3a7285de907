// `orch logs`: an environment's startup log.
import type { Command } from 'commander';
import type { ExitStatus } from './output.js';

/** Declares `orch logs <env> [-f] [--tail <bytes>]`. */
export function addLogs(program: Command, exit: ExitStatus): void {
  program
    .command('logs')
    .description("Print an environment's startup log (the startup script's output)")
    .argument('<env>', 'environment id')
    .option('-f, --follow', 'keep printing new output until the environment stops')
    .option('--tail <bytes>', 'start with the last N bytes')
    .action(async (id: string, opts: { follow?: boolean; tail?: string }) => {
      exit.code = await (await import('../commands/logs.js')).showLogs(id, opts);
    });
}
