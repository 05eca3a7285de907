// `orch exec`: run a command in an environment.
import type { Command } from 'commander';
import type { ExitStatus } from './output.js';

/** Declares `orch exec`; the remote command's status becomes `exit.code`. */
export function addExec(program: Command, exit: ExitStatus): void {
  program
    .command('exec')
    .description('Run a command in an environment; exits with the command’s status (master token)')
    .argument('<env>', 'environment id')
    .argument('<cmd...>', 'the command and its arguments, after --')
    .option('--timeout <seconds>', 'kill the command after this long (default 60); exit status 124')
    .option('--cwd <dir>', 'working directory in the guest')
    .option('--env <NAME=VALUE...>', 'environment variables (repeatable)')
    .action(async (id: string, argv: string[], opts: { timeout?: string; cwd?: string; env?: string[] }) => {
      exit.code = await (await import('../commands/environments.js')).exec(id, argv, opts);
    });
}
