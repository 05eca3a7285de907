import { Command } from 'commander';
import { ConfigError } from './options.js';

/**
 * The root command of a program: usage errors throw (so that `runMain` exits with status 2
 * instead of commander ending the process), `--help` prints to stdout, errors to stderr, and
 * `-V, --version` prints `version` (the program's `package.json` version) and exits 0.
 * Subcommands created from it inherit these settings.
 *
 * @example createProgram('orchd', 'The orchestrator.', manifest.version)
 */
export function createProgram(name: string, description: string, version: string): Command {
  return new Command(name)
    .description(description)
    .version(version, '-V, --version', 'print the version and exit')
    .exitOverride()
    .showHelpAfterError(`(${name} --help lists every option)`);
}

/**
 * Refuses operands given to a root command whose action serves (`orch-agent frobnicate`), naming
 * the unknown command, where commander would only say "too many arguments". Call it first in the
 * root action of a program that also has subcommands (after `allowExcessArguments()`).
 */
export function refuseUnknownCommand(cmd: Command): void {
  const [first] = cmd.args;
  if (first !== undefined) {
    throw new ConfigError(`unknown command ${JSON.stringify(first)}; see ${cmd.name()} --help`);
  }
}
