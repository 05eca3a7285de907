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
