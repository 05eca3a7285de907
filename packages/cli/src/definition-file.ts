import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { DEFINITION_FILE_NAMES } from '@orch/envdef';
import { CliError } from './errors.js';

/** A definition file found on disk. */
export interface DefinitionFile {
  /** Absolute path. */
  readonly path: string;
  /** The path as diagnostics name it: as the user typed it, or relative to the working directory. */
  readonly display: string;
  readonly text: string;
}

/**
 * Finds and reads the definition file the way `compile` and `up` both do: `-f/--file`, then the
 * positional path, then the first of orch.yaml, orch.yml in the working directory. A path that is a
 * directory is searched the same way.
 */
export async function loadDefinitionFile(opts: {
  readonly file?: string | undefined;
  readonly positional?: string | undefined;
  readonly cwd: string;
}): Promise<DefinitionFile> {
  const given = opts.file ?? opts.positional;
  let path = resolve(opts.cwd, given ?? '.');
  if (given === undefined || (await isDirectory(path))) {
    const found = await discover(path);
    if (!found) {
      const where = given === undefined ? 'the working directory' : given;
      throw new CliError(
        `orch: no definition file in ${where}: looked for ${DEFINITION_FILE_NAMES.join(', ')}`,
      );
    }
    path = found;
  }
  const display =
    given !== undefined && resolve(opts.cwd, given) === path ? given : relative(opts.cwd, path) || path;
  return { path, display, text: await read(path, display) };
}

/** The default task id: the name of the definition file's parent directory. */
export function taskIdFromPath(path: string): string {
  return basename(dirname(path));
}

async function discover(dir: string): Promise<string | undefined> {
  for (const name of DEFINITION_FILE_NAMES) {
    const candidate = join(dir, name);
    const s = await stat(candidate).catch(() => undefined);
    if (s?.isFile()) return candidate;
  }
  return undefined;
}

async function isDirectory(path: string): Promise<boolean> {
  const s = await stat(path).catch(() => undefined);
  return s?.isDirectory() ?? false;
}

async function read(path: string, display: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'is a directory'
            : (code ?? 'unreadable');
    throw new CliError(`orch: cannot read definition file ${display}: ${why}`);
  }
}
