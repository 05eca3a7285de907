/**
 * Errors the CLI throws. Only the entry point (`main.ts`) prints them and sets the exit status:
 * 1 for a failure of the work asked for, 2 for a command line that cannot be understood.
 */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  /** The lines to print to stderr; each is printed as it is. */
  readonly lines: readonly string[];

  constructor(
    message: string | readonly string[],
    readonly exitCode: 1 | 2 = 1,
  ) {
    const lines = typeof message === 'string' ? [message] : message;
    super(lines.join('\n'));
    this.lines = lines;
  }
}

/** The command line is wrong (unknown flag, bad value, flags that exclude each other): exit status 2. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  constructor(message: string) {
    super(`orch: ${message}`, 2);
  }
}

/** The definition file has problems: one `file:line:col: message` line each, exit status 1. */
export class DiagnosticsError extends CliError {
  override readonly name = 'DiagnosticsError';
  constructor(lines: readonly string[]) {
    super(lines, 1);
  }
}
