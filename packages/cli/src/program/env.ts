// `orch env`: environments.
import type { Command } from 'commander';
import { out, outputOf } from './output.js';

/** Declares `orch env list|get|rm`. */
export function addEnv(program: Command): void {
  const env = program.command('env').description('List, inspect and remove environments');
  env
    .command('list')
    .description('List environments, newest first')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('../commands/environments.js')).listEnvironments(outputOf(cmd))),
    );
  env
    .command('get')
    .description('Show one environment with its exposed ports')
    .argument('<env>', 'environment id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('../commands/environments.js')).getEnvironment(id, outputOf(cmd))),
    );
  env
    .command('rm')
    .description('Stop an environment and free its capacity')
    .argument('<env>', 'environment id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('../commands/environments.js')).removeEnvironment(id, outputOf(cmd))),
    );
}
