import { Command, CommanderError, Option } from 'commander';
import manifest from '../package.json' with { type: 'json' };
import { CliError } from './errors.js';
import { addApikeys } from './program/apikeys.js';
import { addAttach } from './program/attach.js';
import { addBuild } from './program/build.js';
import { addCompile } from './program/compile.js';
import { addContext } from './program/context.js';
import { addEnv } from './program/env.js';
import { addEvents } from './program/events.js';
import { addExec } from './program/exec.js';
import { addHost } from './program/host.js';
import { addLogs } from './program/logs.js';
import type { ExitStatus } from './program/output.js';
import { addSnapshot } from './program/snapshot.js';
import { addUp } from './program/up.js';

/**
 * Builds the `orch` command tree, one command noun per `program/*.ts` (declaration order is the
 * order `--help` lists them). Each command loads its implementation (`commands/*.ts`) only when it
 * runs; `exec` and `attach` leave the remote exit status in `exit`.
 */
export function buildProgram(exit: ExitStatus): Command {
  const program = new Command('orch')
    .description('Client of the orchestrator for virtual-machine environments.')
    .version(manifest.version, '-V, --version', 'print the version and exit')
    .addOption(
      new Option('-o, --output <mode>', 'output mode: table (human view) or json')
        .choices(['table', 'json'])
        .default('table'),
    )
    .configureHelp({ showGlobalOptions: true, helpWidth: 160 })
    .exitOverride()
    .showSuggestionAfterError();

  addCompile(program);
  addUp(program);
  addBuild(program);
  addContext(program);
  addApikeys(program);
  addHost(program);
  addEnv(program);
  addExec(program, exit);
  addAttach(program, exit);
  addLogs(program, exit);
  addEvents(program, exit);
  addSnapshot(program);
  return program;
}

/** Runs the CLI: the only place that prints errors and sets the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  const exit: ExitStatus = { code: 0 };
  try {
    await buildProgram(exit).parseAsync([...argv], { from: 'user' });
    return exit.code;
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
