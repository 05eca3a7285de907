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

/** Where `exec` and `attach` leave the exit status of the remote command they ran. */
export interface ExitStatus {
  code: number;
}
