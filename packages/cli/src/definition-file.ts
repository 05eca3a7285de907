import type { Stats } from 'node:fs';
import { constants, type FileHandle, open, stat } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { DEFINITION_FILE_NAMES, MAX_SOURCE_LENGTH, printable } from '@orch/envdef';
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
        `orch: no definition file in ${printable(where)}: looked for ${DEFINITION_FILE_NAMES.join(', ')}`,
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

/**
 * The most bytes read from a definition file. The limit (`MAX_SOURCE_LENGTH`) counts UTF-16 code
 * units, and UTF-8 never spends more than 4 bytes on one, so a file that fits is read whole; a file
 * larger than this decodes (even cut short) to more code units than the limit, and `parseSource`
 * refuses it with its usual diagnostic. Memory stays bounded, whatever the file's size.
 */
const MAX_READ_BYTES = 4 * MAX_SOURCE_LENGTH + 1;

/**
 * Reads a definition file as UTF-8 (as `readFile(path, 'utf8')` would: a BOM is kept for the
 * parser, malformed bytes become U+FFFD), reading at most {@link MAX_READ_BYTES}. Only regular
 * files are read: a FIFO would block forever and a device (`/dev/zero`) never ends.
 */
async function read(path: string, display: string): Promise<string> {
  const fail = (why: string) =>
    new CliError(`orch: cannot read definition file ${printable(display)}: ${why}`);
  let handle: FileHandle | undefined;
  try {
    const found = await stat(path);
    if (!found.isFile()) throw fail(notRegular(found));
    // The path may be replaced between stat and open: O_NONBLOCK keeps open() from waiting for the
    // writer of a FIFO, and the descriptor's own stat is what decides.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const opened = await handle.stat();
    if (!opened.isFile()) throw fail(notRegular(opened));
    return await readBounded(handle, opened.size);
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw fail(errnoReason(err));
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** Reads from `handle` until its end or {@link MAX_READ_BYTES}, whichever comes first, as UTF-8. */
async function readBounded(handle: FileHandle, sizeHint: number): Promise<string> {
  let buffer = Buffer.allocUnsafe(Math.min(MAX_READ_BYTES, sizeHint + 1));
  let length = 0;
  while (length < MAX_READ_BYTES) {
    if (length === buffer.length) {
      // Longer than its size said (a file still growing, or one of /proc's that report size 0).
      const grown = Buffer.allocUnsafe(Math.min(MAX_READ_BYTES, Math.max(4096, buffer.length * 2)));
      buffer.copy(grown, 0, 0, length);
      buffer = grown;
    }
    const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
    if (bytesRead === 0) break;
    length += bytesRead;
  }
  return buffer.toString('utf8', 0, length);
}

/** Why a path that is not a regular file is not read. */
function notRegular(s: Stats): string {
  if (s.isDirectory()) return 'is a directory';
  const kind = s.isFIFO()
    ? 'a named pipe (FIFO)'
    : s.isCharacterDevice()
      ? 'a character device'
      : s.isBlockDevice()
        ? 'a block device'
        : s.isSocket()
          ? 'a socket'
          : 'of another kind';
  return `not a regular file (${kind})`;
}

function errnoReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOTDIR':
      return 'a part of the path is not a directory';
    case 'ELOOP':
      return 'too many levels of symbolic links';
    case 'ENXIO':
      return 'not a regular file';
    default:
      return code ?? 'unreadable';
  }
}
