// `orch apikeys`: API keys (master token only).
import type { Command } from 'commander';
import { out, outputOf } from './output.js';

/** Declares `orch apikeys create|list|revoke`. */
export function addApikeys(program: Command): void {
  const apikeys = program
    .command('apikeys')
    .description('Manage API keys (master token only; needs DATABASE_URL on orchd)');
  apikeys
    .command('create')
    .description('Create a key and print its secret, once')
    .requiredOption('--label <label>', 'what the key is for')
    .action(async (opts: { label: string }, cmd: Command) =>
      out(await (await import('../commands/apikeys.js')).createKey(opts.label, outputOf(cmd))),
    );
  apikeys
    .command('list')
    .description('List live keys')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('../commands/apikeys.js')).listKeys(outputOf(cmd))),
    );
  apikeys
    .command('revoke')
    .description('Revoke a key by id')
    .argument('<id>', 'key id (from apikeys list)')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('../commands/apikeys.js')).revokeKey(id, outputOf(cmd))),
    );
}
