// `orch up`: create an environment from a definition file.
import type { Command } from 'commander';
import { previewOptions, runPreview } from './compile.js';
import { out, outputOf } from './output.js';

/** Declares `orch up`. */
export function addUp(program: Command): void {
  previewOptions(
    program.command('up').description('Create an environment from a definition file and wait until it runs'),
  )
    .option('--dry-run', 'print what would be posted, exactly as compile does, and create nothing')
    .option('--secret <NAME=VALUE...>', 'a secret value the definition references (repeatable)')
    .option('--secrets-file <file>', 'NAME=VALUE lines with secret values')
    .option('--detach', 'return once the environment is placed; do not wait for it to run')
    .action(async (path: string | undefined, opts: { dryRun?: boolean }, cmd: Command) => {
      if (opts.dryRun) return runPreview(cmd, path);
      const { up } = await import('../commands/environments.js');
      out(await up(path, cmd.opts(), outputOf(cmd), process.cwd()));
    });
}
