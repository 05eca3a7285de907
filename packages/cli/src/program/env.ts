// `orch env`: environments.
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { printing } from './output.js';

const environments = () => import('../commands/environments.js');

/** Declares `orch env list|get|pause|resume|rm`. */
export function addEnv(program: Command): void {
  const env = program.command('env').description('List, inspect, pause, resume and remove environments');
  env
    .command('list')
    .description('List environments, newest first')
    .action(
      printing(async (_opts: unknown, mode: OutputMode) => (await environments()).listEnvironments(mode)),
    );
  env
    .command('get')
    .description('Show one environment with its exposed ports and its services')
    .argument('<env>', 'environment id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await environments()).getEnvironment(id, mode),
      ),
    );
  env
    .command('pause')
    .description('Pause a running environment in place: memory saved on its host, CPU and RAM freed')
    .argument('<env>', 'environment id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await environments()).pauseEnvironment(id, mode),
      ),
    );
  env
    .command('resume')
    .description('Resume a paused environment where it stopped (same id, processes and files)')
    .argument('<env>', 'environment id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) =>
        (await environments()).resumeEnvironment(id, mode),
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
