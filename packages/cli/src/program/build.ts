// `orch build`: run a definition's setup lines into cached build layers.
import type { Command } from 'commander';
import { out, outputOf } from './output.js';

/** Declares `orch build`. */
export function addBuild(program: Command): void {
  program
    .command('build')
    .description('Build the setup lines of a definition file into cached layers (for up --from-build)')
    .argument('[path]', 'definition file, or a directory holding orch.yaml or orch.yml')
    .option('-f, --file <path>', 'definition file (wins over [path]; default: orch.yaml, orch.yml here)')
    .option('--task-id <id>', 'task id of the build (default: name of the definition file’s directory)')
    .option('--no-cache', 'build every layer again, even when a kept layer has its key')
    .option('--secret <NAME=VALUE...>', 'a secret value the definition references (repeatable)')
    .option('--secrets-file <file>', 'NAME=VALUE lines with secret values')
    .option('--detach', 'return once the build has started; do not follow it')
    .action(async (path: string | undefined, _opts: unknown, cmd: Command) => {
      const { build } = await import('../commands/builds.js');
      out(await build(path, cmd.opts(), outputOf(cmd), process.cwd()));
    });
}
