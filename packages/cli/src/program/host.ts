// `orch host`: host agents.
import { type Command, Option } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { printing } from './output.js';

const hosts = () => import('../commands/hosts.js');

interface RegisterFlags {
  url: string;
  kind: string;
  token?: string;
  id?: string;
  label?: string[];
}

/** Declares `orch host register|list|get|images|cordon|uncordon|drain|rm`. */
export function addHost(program: Command): void {
  const host = program.command('host').description('Register, inspect, cordon and remove host agents');
  host
    .command('register')
    .description('Register a host agent (or replace the details of an existing id)')
    .requiredOption('--url <agent-url>', 'agent URL, http or https, no credentials, query or fragment')
    .addOption(new Option('--kind <kind>', 'host kind').choices(['microvm', 'gpu']).default('microvm'))
    .option('--token <token>', 'agent token (default for microvm: MICROVM_AGENT_TOKEN on orchd)')
    .option('--id <id>', 'host id (default: the id the agent reports)')
    .option('--label <key=value...>', 'labels, repeatable')
    .action(
      printing(async (opts: RegisterFlags, mode: OutputMode) => (await hosts()).registerHost(opts, mode)),
    );
  host
    .command('list')
    .description('List hosts with state, health and capacity used/total')
    .action(printing(async (_opts: unknown, mode: OutputMode) => (await hosts()).listHosts(mode)));
  host
    .command('get')
    .description('Show one host')
    .argument('<id>', 'host id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) => (await hosts()).getHost(id, mode)),
    );
  host
    .command('images')
    .description('List the images a host boots (name, size, digest, source)')
    .argument('<id>', 'host id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) => (await hosts()).hostImages(id, mode)),
    );
  for (const action of ['cordon', 'uncordon'] as const) {
    host
      .command(action)
      .description(
        action === 'cordon'
          ? 'Stop placing new environments on a host'
          : 'Place environments on a host again',
      )
      .argument('<id>', 'host id')
      .action(
        printing(async (id: string, _opts: unknown, mode: OutputMode) =>
          (await hosts()).setHostState(id, action, mode),
        ),
      );
  }
  host
    .command('drain')
    .description(
      'Cordon a host and move its running environments to other hosts (live snapshot, transfer, resume)',
    )
    .argument('<id>', 'host id')
    .option('--detach', 'do not wait for the moves to finish')
    .action(
      printing(async (id: string, opts: { detach?: boolean }, mode: OutputMode) =>
        (await hosts()).drainHost(id, opts, mode),
      ),
    );
  host
    .command('rm')
    .description('Remove a host')
    .argument('<id>', 'host id')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) => (await hosts()).removeHost(id, mode)),
    );
}
