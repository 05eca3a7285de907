// What every command's declaration shares: where it prints and the output mode it was asked for.
import type { Command } from 'commander';
import type { OutputMode } from '../commands/preview.js';

/** Prints a command's result on stdout, as is. */
export function out(text: string): void {
  process.stdout.write(text);
}

/** The global `-o/--output` mode as the command sees it. */
export function outputOf(cmd: Command): OutputMode {
  return cmd.optsWithGlobals().output as OutputMode;
}

/**
 * A commander action that prints what `run` returns. Commander calls an action with the command's
 * arguments, its options and the command itself; `run` gets the same, with the command replaced
 * by the `-o/--output` mode it was asked for.
 *
 * @example
 * host
 *   .command('get')
 *   .argument('<id>', 'host id')
 *   .action(printing(async (id: string, _opts: unknown, mode: OutputMode) => (await hosts()).getHost(id, mode)));
 */
export function printing<A extends unknown[]>(
  run: (...args: [...A, OutputMode]) => Promise<string>,
): (...args: [...A, Command]) => Promise<void> {
  return async (...args) => {
    const cmd = args[args.length - 1] as Command;
    const argsAndOpts = args.slice(0, -1) as A;
    out(await run(...argsAndOpts, outputOf(cmd)));
  };
}

/** Where `exec` and `attach` leave the exit status of the remote command they ran. */
export interface ExitStatus {
  code: number;
}
