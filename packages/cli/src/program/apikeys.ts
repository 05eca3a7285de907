// `orch apikeys`: API keys (master token only).
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { printing } from './output.js';

const keys = () => import('../commands/apikeys.js');

/** Declares `orch apikeys create|list|revoke`. */
export function addApikeys(program: Command): void {
  const apikeys = program
    .command('apikeys')
    .description('Manage API keys (master token only; needs DATABASE_URL on orchd)');
  apikeys
    .command('create')
    .description('Create a key and print its secret, once')
    .requiredOption('--label <label>', 'what the key is for')
    .action(
      printing(async (opts: { label: string }, mode: OutputMode) =>
        (await keys()).createKey(opts.label, mode),
      ),
    );
  apikeys
    .command('list')
    .description('List live keys')
    .action(printing(async (_opts: unknown, mode: OutputMode) => (await keys()).listKeys(mode)));
  apikeys
    .command('revoke')
    .description('Revoke a key by id')
    .argument('<id>', 'key id (from apikeys list)')
    .action(
      printing(async (id: string, _opts: unknown, mode: OutputMode) => (await keys()).revokeKey(id, mode)),
    );
}
