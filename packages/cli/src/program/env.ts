// `orch env`: environments.
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { printing } from './output.js';

const environments = () => import('../commands/environments.js');

/** Declares `orch env list|get|rm`. */
export function addEnv(program: Command): void {
  const env = program.command('env').description('List, inspect and remove environments');
  env
    .command('list')
    .description('List environments, newest first')
    .action(
      printing(async (_opts: unknown, mode: OutputMode) => (await environments()).listEnvironments(mode)),
    );
  env
    .command('get')
    .description('Show one environment with its exposed ports')
    .argument('<env>', 'environment id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await environments()).getEnvironment(id, mode),
      ),
    );
  env
    .command('rm')
    .description('Stop an environment and free its capacity')
    .argument('<env>', 'environment id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await environments()).removeEnvironment(id, mode),
      ),
    );
}
