// `orch connect` and `orch context`: saved orchestrator contexts.
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';
import { out, printing } from './output.js';

const contexts = () => import('../commands/contexts.js');

/** Declares `orch connect` and `orch context list|use`. */
export function addContext(program: Command): void {
  program
    .command('connect')
    .description('Save an orchestrator context (URL and token) and make it current; checks the token first')
    .argument('<url>', 'orchestrator URL, for example http://127.0.0.1:8080')
    .option('--token <token>', 'bearer token: the master token or an API key')
    .option('--master', 'the token is the master token (needed for apikeys and host changes)')
    .option('--name <ctx>', 'context name (default: the URL host:port)')
    .action(
      printing(
        async (url: string, opts: { token?: string; master?: boolean; name?: string }, mode: OutputMode) =>
          (await contexts()).connect(url, opts, mode),
      ),
    );

  const context = program.command('context').description('List or switch saved orchestrator contexts');
  context
    .command('list')
    .description('List contexts (tokens are never shown)')
    .action(printing(async (_opts: unknown, mode: OutputMode) => (await contexts()).listContexts(mode)));
  context
    .command('use')
    .description('Make a context current')
    .argument('<name>', 'context name')
    .action(async (name: string) => out(await (await contexts()).useContext(name)));
}
