// `orch attach`: an environment's serial console on this terminal.
import type { Command } from 'commander';
import type { ExitStatus } from './output.js';

/** Declares `orch attach`; its exit status becomes `exit.code`. */
export function addAttach(program: Command, exit: ExitStatus): void {
  program
    .command('attach')
    .description('Attach this terminal to an environment’s serial console; Ctrl-] detaches (master token)')
    .argument('<env>', 'environment id')
    .action(async (id: string) => {
      exit.code = await (await import('../commands/attach.js')).attach(id);
    });
}
