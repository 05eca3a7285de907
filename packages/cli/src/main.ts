import { Command, CommanderError, Option } from 'commander';
import type { OutputMode, PreviewFlags } from './commands/preview.js';
import { CliError } from './errors.js';

const FORMATS = ['text', 'json', 'yaml'];
const ONLY_PARTS = ['spec', 'startup-script', 'manifest', 'expose', 'secrets'];

/** Adds the flags `compile` and `up --dry-run` share. */
function previewOptions(cmd: Command): Command {
  return cmd
    .argument('[path]', 'definition file, or a directory holding orch.yaml or orch.yml')
    .option('-f, --file <path>', 'definition file (wins over [path]; default: orch.yaml, orch.yml here)')
    .option('--task-id <id>', 'task id to render (default: name of the definition file’s directory)')
    .addOption(new Option('--format <format>', 'output format (overrides -o/--output)').choices(FORMATS))
    .addOption(new Option('--only <part>', 'print one part undecorated').choices(ONLY_PARTS))
    .option('--from-build <snapshot-id>', 'compile as from a build artifact: seed snapshot, run phase only');
}

async function runPreview(cmd: Command, path: string | undefined): Promise<void> {
  const { preview } = await import('./commands/preview.js');
  const output = cmd.optsWithGlobals().output as OutputMode;
  process.stdout.write(await preview(path, cmd.opts<PreviewFlags>(), output, process.cwd()));
}

/** Builds the `orch` command tree. Each command loads its implementation only when it runs. */
export function buildProgram(): Command {
  const program = new Command('orch')
    .description('Client of the orchestrator for virtual-machine environments.')
    .addOption(
      new Option('-o, --output <mode>', 'output mode: table (human view) or json')
        .choices(['table', 'json'])
        .default('table'),
    )
    .configureHelp({ showGlobalOptions: true, helpWidth: 160 })
    .exitOverride()
    .showSuggestionAfterError();

  previewOptions(
    program
      .command('compile')
      .description(
        'Print what a definition file compiles into; creates nothing and sends nothing (works offline)',
      ),
  ).action(async (path: string | undefined, _opts: unknown, cmd: Command) => runPreview(cmd, path));

  previewOptions(
    program
      .command('up')
      .description('Create an environment from a definition file (with --dry-run: print it only)'),
  )
    .option('--dry-run', 'print what would be posted, exactly as compile does, and create nothing')
    .action(async (path: string | undefined, opts: { dryRun?: boolean }, cmd: Command) => {
      if (opts.dryRun) return runPreview(cmd, path);
      throw new CliError(
        'orch: up needs an orchestrator (orchd) to create the environment, and this version of orch cannot reach one yet; ' +
          'use `orch up --dry-run` or `orch compile` to preview the request',
      );
    });

  const out = (text: string): void => {
    process.stdout.write(text);
  };
  const outputOf = (cmd: Command) => cmd.optsWithGlobals().output as OutputMode;

  program
    .command('connect')
    .description('Save an orchestrator context (URL and token) and make it current; checks the token first')
    .argument('<url>', 'orchestrator URL, for example http://127.0.0.1:8080')
    .option('--token <token>', 'bearer token: the master token or an API key')
    .option('--master', 'the token is the master token (needed for apikeys and host changes)')
    .option('--name <ctx>', 'context name (default: the URL host:port)')
    .action(async (url: string, opts: { token?: string; master?: boolean; name?: string }, cmd: Command) => {
      const { connect } = await import('./commands/contexts.js');
      out(await connect(url, opts, outputOf(cmd)));
    });

  const context = program.command('context').description('List or switch saved orchestrator contexts');
  context
    .command('list')
    .description('List contexts (tokens are never shown)')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('./commands/contexts.js')).listContexts(outputOf(cmd))),
    );
  context
    .command('use')
    .description('Make a context current')
    .argument('<name>', 'context name')
    .action(async (name: string) => out(await (await import('./commands/contexts.js')).useContext(name)));

  const apikeys = program
    .command('apikeys')
    .description('Manage API keys (master token only; needs DATABASE_URL on orchd)');
  apikeys
    .command('create')
    .description('Create a key and print its secret, once')
    .requiredOption('--label <label>', 'what the key is for')
    .action(async (opts: { label: string }, cmd: Command) =>
      out(await (await import('./commands/apikeys.js')).createKey(opts.label, outputOf(cmd))),
    );
  apikeys
    .command('list')
    .description('List live keys')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('./commands/apikeys.js')).listKeys(outputOf(cmd))),
    );
  apikeys
    .command('revoke')
    .description('Revoke a key by id')
    .argument('<id>', 'key id (from apikeys list)')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/apikeys.js')).revokeKey(id, outputOf(cmd))),
    );

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
      async (
        opts: { url: string; kind: string; token?: string; id?: string; label?: string[] },
        cmd: Command,
      ) => out(await (await import('./commands/hosts.js')).registerHost(opts, outputOf(cmd))),
    );
  host
    .command('list')
    .description('List hosts with state, health and capacity used/total')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('./commands/hosts.js')).listHosts(outputOf(cmd))),
    );
  host
    .command('get')
    .description('Show one host')
    .argument('<id>', 'host id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/hosts.js')).getHost(id, outputOf(cmd))),
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
      .action(async (id: string, _o: unknown, cmd: Command) =>
        out(await (await import('./commands/hosts.js')).setHostState(id, action, outputOf(cmd))),
      );
  }
  host
    .command('rm')
    .description('Remove a host')
    .argument('<id>', 'host id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/hosts.js')).removeHost(id, outputOf(cmd))),
    );

  return program;
}

/** Runs the CLI: the only place that prints errors and sets the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has already printed its message; help and version are not failures.
      return err.exitCode === 0 ? 0 : 2;
    }
    if (err instanceof CliError) {
      process.stderr.write(`${err.lines.join('\n')}\n`);
      return err.exitCode;
    }
    process.stderr.write(`orch: unexpected error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
