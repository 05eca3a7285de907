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
    program.command('up').description('Create an environment from a definition file and wait until it runs'),
  )
    .option('--dry-run', 'print what would be posted, exactly as compile does, and create nothing')
    .option('--secret <NAME=VALUE...>', 'a secret value the definition references (repeatable)')
    .option('--secrets-file <file>', 'NAME=VALUE lines with secret values')
    .option('--detach', 'return once the environment is placed; do not wait for it to run')
    .action(async (path: string | undefined, opts: { dryRun?: boolean }, cmd: Command) => {
      if (opts.dryRun) return runPreview(cmd, path);
      const { up } = await import('./commands/environments.js');
      process.stdout.write(
        await up(path, cmd.opts(), cmd.optsWithGlobals().output as OutputMode, process.cwd()),
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

  const env = program.command('env').description('List, inspect and remove environments');
  env
    .command('list')
    .description('List environments, newest first')
    .action(async (_o: unknown, cmd: Command) =>
      out(await (await import('./commands/environments.js')).listEnvironments(outputOf(cmd))),
    );
  env
    .command('get')
    .description('Show one environment with its exposed ports')
    .argument('<env>', 'environment id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/environments.js')).getEnvironment(id, outputOf(cmd))),
    );
  env
    .command('rm')
    .description('Stop an environment and free its capacity')
    .argument('<env>', 'environment id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/environments.js')).removeEnvironment(id, outputOf(cmd))),
    );

  program
    .command('exec')
    .description('Run a command in an environment; exits with the command’s status (master token)')
    .argument('<env>', 'environment id')
    .argument('<cmd...>', 'the command and its arguments, after --')
    .option('--timeout <seconds>', 'kill the command after this long (default 60); exit status 124')
    .option('--cwd <dir>', 'working directory in the guest')
    .option('--env <NAME=VALUE...>', 'environment variables (repeatable)')
    .action(async (id: string, argv: string[], opts: { timeout?: string; cwd?: string; env?: string[] }) => {
      status = await (await import('./commands/environments.js')).exec(id, argv, opts);
    });

  program
    .command('attach')
    .description('Attach this terminal to an environment’s serial console; Ctrl-] detaches (master token)')
    .argument('<env>', 'environment id')
    .action(async (id: string) => {
      status = await (await import('./commands/attach.js')).attach(id);
    });

  const snapshot = program.command('snapshot').description('Take, inspect, restore and delete snapshots');
  snapshot
    .command('create')
    .description('Snapshot a running environment (disk; with --live also memory)')
    .argument('<env>', 'environment id')
    .option('--live', 'also save memory and CPU state, so a restore resumes where it stopped')
    .option('--comment <text>', 'a note kept with the snapshot')
    .option('--mode <mode>', 'stored verbatim (default manual)')
    .option('--retention-until <date-time>', 'garbage-collect the snapshot after this time')
    .option('--export-to <destination>', 'record an export request to this destination')
    .option('--export-status <status>', 'status of that export, stored verbatim (default pending)')
    .action(async (id: string, opts: Record<string, string | boolean>, cmd: Command) =>
      out(await (await import('./commands/snapshots.js')).createSnapshot(id, opts, outputOf(cmd))),
    );
  snapshot
    .command('get')
    .description('Show one snapshot')
    .argument('<snapshot>', 'snapshot id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/snapshots.js')).getSnapshot(id, outputOf(cmd))),
    );
  snapshot
    .command('list')
    .description('List snapshots, newest first')
    .option('--env <env>', 'only of this environment')
    .option('--task <task-id>', 'only of this task')
    .option('--state <state>', 'only in this state')
    .action(async (opts: { env?: string; task?: string; state?: string }, cmd: Command) =>
      out(await (await import('./commands/snapshots.js')).listSnapshots(opts, outputOf(cmd))),
    );
  snapshot
    .command('rm')
    .description('Delete a snapshot')
    .argument('<snapshot>', 'snapshot id')
    .action(async (id: string, _o: unknown, cmd: Command) =>
      out(await (await import('./commands/snapshots.js')).removeSnapshot(id, outputOf(cmd))),
    );
  snapshot
    .command('restore')
    .description('Start a new environment from a snapshot (live: resumes; disk: cold-boots)')
    .argument('<snapshot>', 'snapshot id')
    .option('--task-id <id>', 'task id of the new environment (default: the original one)')
    .option('--detach', 'do not wait for it to run')
    .action(async (id: string, opts: { taskId?: string; detach?: boolean }, cmd: Command) =>
      out(await (await import('./commands/snapshots.js')).restoreSnapshot(id, opts, outputOf(cmd))),
    );

  return program;
}

/** Exit status a command asks for (exec and attach pass the remote one on). */
let status = 0;

/** Runs the CLI: the only place that prints errors and sets the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync([...argv], { from: 'user' });
    return status;
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
