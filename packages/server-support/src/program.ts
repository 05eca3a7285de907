import { Command } from 'commander';

/**
 * The root command of a program: usage errors throw (so that `runMain` exits with status 2
 * instead of commander ending the process), `--help` prints to stdout, errors to stderr.
 * Subcommands created from it inherit these settings.
 */
export function createProgram(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .exitOverride()
    .showHelpAfterError(`(${name} --help lists every option)`);
}
