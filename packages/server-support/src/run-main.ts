import { CommanderError } from 'commander';
import { ConfigError } from './options.js';

/** Exit statuses, the same in every program. */
export const EXIT = {
  /** A clean stop (after SIGINT/SIGTERM), or a command that did its work. */
  ok: 0,
  /** Start-up failed, the program failed while running, or a stop overran its bound. */
  failure: 1,
  /** The configuration or the command line was refused (nothing was started). */
  config: 2,
} as const;

/** How {@link runMain} behaves; every field has a default. */
export interface MainOptions {
  /** How long a stop may take after the first SIGINT/SIGTERM before the process is forced out (status 1). */
  readonly stopTimeoutMs?: number;
  /** A one-line message for errors the program knows better than `err.message`, else undefined. */
  readonly describeError?: (err: unknown) => string | undefined;
  /** Ends the process (tests replace it). */
  readonly exit?: (code: number) => void;
  /** Where messages for people go (default: stderr). */
  readonly write?: (text: string) => void;
}

/**
 * The entry point of a program, the only place that turns outcomes into exit statuses:
 * `main(signal)` parses the command line and runs; `signal` aborts on the first SIGINT or SIGTERM
 * (listened for before `main` starts, so a signal during start-up still stops cleanly).
 * - `main` resolves: status 0;
 * - it throws a `ConfigError` or a commander usage error: the problems are printed, status 2
 *   (`--help` and `--version` are status 0);
 * - it throws anything else (start-up failure, a crash): `<name>: <message>`, status 1;
 * - the stop takes longer than `stopTimeoutMs` (default 10 s), or a second signal arrives: the
 *   process is forced out with status 1.
 * Resolves with the status (also set as `process.exitCode`); a process that still has handles
 * open two seconds later is ended.
 * @example
 * await runMain('board-router', (signal) => program(signal).parseAsync(process.argv));
 */
export async function runMain(
  name: string,
  main: (signal: AbortSignal) => Promise<unknown>,
  options: MainOptions = {},
): Promise<number> {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const write = options.write ?? ((text: string) => void process.stderr.write(text));
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const life = new AbortController();
  let forceTimer: NodeJS.Timeout | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (life.signal.aborted) {
      write(`${name}: ${signal} again; exiting without a clean stop\n`);
      exit(EXIT.failure);
      return;
    }
    life.abort();
    forceTimer = setTimeout(() => {
      write(`${name}: did not stop within ${stopTimeoutMs} ms; exiting\n`);
      exit(EXIT.failure);
    }, stopTimeoutMs);
    forceTimer.unref();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let code: number;
  try {
    await main(life.signal);
    code = EXIT.ok;
  } catch (err) {
    code = exitCodeOf(err);
    const message = messageOf(err, options.describeError);
    if (message !== undefined) write(`${name}: ${message}\n`);
  } finally {
    if (forceTimer) clearTimeout(forceTimer);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  process.exitCode = code;
  if (!options.exit) setTimeout(() => exit(code), 2000).unref();
  return code;
}

/** The exit status for an error thrown by a program's main. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof ConfigError) return EXIT.config;
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.config;
  return EXIT.failure;
}

/** What to print for an error; undefined when commander already printed it. */
function messageOf(err: unknown, describe: MainOptions['describeError']): string | undefined {
  if (err instanceof CommanderError) return undefined;
  if (err instanceof ConfigError) return err.message;
  const known = describe?.(err);
  if (known !== undefined) return known;
  return err instanceof Error ? err.message : String(err);
}
