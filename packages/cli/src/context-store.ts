import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CliError } from './errors.js';

/** One orchestrator the CLI can talk to. `master` marks the token as the master token. */
export interface Context {
  readonly url: string;
  readonly token?: string;
  readonly master: boolean;
}

export interface ContextsFile {
  current?: string;
  contexts: Record<string, Context>;
}

/**
 * The contexts file: JSON, mode 0600 in a 0700 directory (it holds tokens), written atomically
 * (temp file + rename) so a crash never leaves half a file.
 */
export class ContextStore {
  constructor(readonly path: string) {}

  async read(): Promise<ContextsFile> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: {} };
      throw new CliError(`orch: cannot read ${this.path}: ${(err as Error).message}`);
    }
    try {
      const parsed = JSON.parse(text) as ContextsFile;
      if (typeof parsed !== 'object' || parsed === null || typeof parsed.contexts !== 'object')
        throw new Error('no contexts');
      return parsed;
    } catch {
      throw new CliError(`orch: ${this.path} is not a valid contexts file; fix or remove it`);
    }
  }

  async write(file: ContextsFile): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, this.path);
  }

  /** The context to use: the current one, or a clear error saying how to make one. */
  async current(): Promise<{ name: string; context: Context }> {
    const file = await this.read();
    const name = file.current;
    const context =
      name !== undefined && Object.hasOwn(file.contexts, name) ? file.contexts[name] : undefined;
    if (name === undefined || !context) {
      throw new CliError('orch: no orchestrator context: run `orch connect <url> --token <token>` first');
    }
    return { name, context };
  }
}
