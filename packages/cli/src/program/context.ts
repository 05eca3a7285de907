// `orch connect` and `orch context`: saved orchestrator contexts.
import type { Command } from 'commander';
import { out, outputOf } from './output.js';

/** Declares `orch connect` and `orch context list|use`. */
export function addContext(program: Command): void {
  program
    .command('connect')
    .description('Save an orchestrator context (URL and token) and make it current; checks the token first')
    .argument('<url>', 'orchestrator URL, for example http://127.0.0.1:8080')
    .option('--token <token>', 'bearer token: the master token or an API key')
    .option('--master', 'the token is the master token (needed for apikeys and host changes)')
    .option('--name <ctx>', 'context name (default: the URL host:port)')
    .action(async (url: string, opts: { token?: string; master?: boolean; name?: string }, cmd: Command) => {
      const { connect } = await import('../commands/contexts.js');
      out(await connect(url, opts, outputOf(cmd)));
    });

  const context = program.command('context').description('List or switch saved orchestrator contexts');
  context
    .command('list')
    .description('List contexts (tokens are never shown)')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('../commands/contexts.js')).listContexts(outputOf(cmd))),
    );
  context
    .command('use')
    .description('Make a context current')
    .argument('<name>', 'context name')
    .action(async (name: string) => out(await (await import('../commands/contexts.js')).useContext(name)));
}
