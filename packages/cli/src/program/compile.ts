// `orch compile`: what a definition file compiles into (also `up --dry-run`).
import { type Command, Option } from 'commander';
import type { PreviewFlags } from '../commands/preview.js';
import { out, outputOf } from './output.js';

const FORMATS = ['text', 'json', 'yaml'];
const ONLY_PARTS = ['spec', 'startup-script', 'manifest', 'expose', 'secrets'];

/** Adds the flags `compile` and `up --dry-run` share. */
export function previewOptions(cmd: Command): Command {
  return cmd
    .argument('[path]', 'definition file, or a directory holding orch.yaml or orch.yml')
    .option('-f, --file <path>', 'definition file (wins over [path]; default: orch.yaml, orch.yml here)')
    .option('--task-id <id>', 'task id to render (default: name of the definition file’s directory)')
    .addOption(new Option('--format <format>', 'output format (overrides -o/--output)').choices(FORMATS))
    .addOption(new Option('--only <part>', 'print one part undecorated').choices(ONLY_PARTS))
    .option('--from-build <snapshot-id>', 'compile as from a build artifact: seed snapshot, run phase only')
    .option(
      '--image-is-base',
      'with --from-build: image names what the artifact was built on (orchd checks)',
    );
}

/** Prints the preview of the definition at `path` with the command's flags. */
export async function runPreview(cmd: Command, path: string | undefined): Promise<void> {
  const { preview } = await import('../commands/preview.js');
  out(await preview(path, cmd.opts<PreviewFlags>(), outputOf(cmd), process.cwd()));
}

/** Declares `orch compile`. */
export function addCompile(program: Command): void {
  previewOptions(
    program
      .command('compile')
      .description(
        'Print what a definition file compiles into; creates nothing and sends nothing (works offline)',
      ),
  ).action(async (path: string | undefined, _opts: unknown, cmd: Command) => runPreview(cmd, path));
}
