import { spawn } from 'node:child_process';

/** A host command that failed: its argv, exit status and the tail of its stderr. */
export class CommandError extends Error {
  override readonly name = 'CommandError';
  constructor(
    readonly argv: readonly string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(
      `${argv.join(' ')} failed (${exitCode === null ? 'killed' : `exit ${exitCode}`}): ${stderr.trim().slice(-2000)}`,
    );
  }
}

/**
 * Runs a host command without a shell and resolves with its stdout; rejects with a
 * {@link CommandError} (or ENOENT when the program is missing).
 */
export function run(
  argv: readonly string[],
  opts: { cwd?: string; input?: Buffer | string; env?: NodeJS.ProcessEnv; maxOutput?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.once('error', reject);
    child.once('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      if (code === 0) resolve(stdout);
      else reject(new CommandError(argv, code, Buffer.concat(err).toString('utf8')));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Whether an executable is on PATH (or is an existing absolute path). */
export async function which(program: string): Promise<string | undefined> {
  try {
    return (await run(['sh', '-c', 'command -v "$1"', 'sh', program])).trim() || undefined;
  } catch {
    return undefined;
  }
}
