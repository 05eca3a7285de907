import { lstat, mkdir, realpath, type stat } from 'node:fs/promises';
import { isAbsolute, join, normalize, sep } from 'node:path';
import { AgentError } from '../errors.js';

/** `details.reason` of a `file://` destination this agent refuses to write or read. */
export const OUTSIDE_EXPORT_ROOTS = 'outside_export_roots';

/**
 * Where `file://` exports may be written and fetched from: the directories the agent's operator
 * configured (`AGENT_EXPORT_ROOTS`; by default one, `<data dir>/exports`). The agent runs as root,
 * so a destination is an operator decision, never a caller's: anything else is refused
 * (`400 invalid_argument`, `details.reason: outside_export_roots`) before anything is created.
 *
 * A destination is checked on its **real** path: the longest prefix of it that exists is resolved
 * with `realpath` (every symlink in it followed), the rest (which does not exist, so holds no
 * symlink) appended, and the result must be a root's real path or lie below it. So a symlink
 * planted inside a root that points out of it does not escape, and a root given through a symlink
 * still works. Races: the agent writes to the real path it checked, creates what is missing
 * itself (0700), checks the real path again after creating it, and opens each file with
 * `O_NOFOLLOW | O_EXCL`; what remains is someone swapping an existing directory for a symlink
 * between that check and the open, which needs write access to a directory under the root, so a
 * root or a directory below it that is writable by group or others is refused.
 */
export class ExportRoots {
  /** The configured roots, absolute and normalised (no trailing `/`). */
  readonly roots: readonly string[];

  constructor(roots: readonly string[]) {
    this.roots = roots.map((r) => {
      if (!isAbsolute(r)) throw new Error(`export root ${r} is not an absolute path`);
      const n = normalize(r);
      return n.length > 1 && n.endsWith(sep) ? n.slice(0, -1) : n;
    });
  }

  /** Creates the roots that do not exist yet (0700); the agent does it at start. */
  async ensure(): Promise<void> {
    for (const r of this.roots) await mkdir(r, { recursive: true, mode: 0o700 });
  }

  /**
   * The real directory of `path` (a `file://` destination's path, already free of `.`/`..`), after
   * checking it lies under a root: the path to write to or read from. Creates nothing.
   */
  async resolve(path: string, field: string): Promise<string> {
    const refuse = (why: string) =>
      AgentError.invalid(`${field}: file://${path} ${why}`, { field, reason: OUTSIDE_EXPORT_ROOTS });
    if (this.roots.length === 0)
      throw refuse(
        'is refused: this agent has no export roots (AGENT_EXPORT_ROOTS) for file:// destinations',
      );
    const real = await realOf(path);
    for (const root of this.roots) {
      const realRoot = await realpath(root).catch(() => undefined);
      if (realRoot === undefined) continue;
      if (real !== realRoot && !real.startsWith(realRoot === sep ? sep : `${realRoot}${sep}`)) continue;
      await refuseShared(realRoot, real, refuse);
      return real;
    }
    throw refuse(
      `is not under an export root of this agent (${this.roots.join(', ')}), once symlinks are resolved`,
    );
  }

  /**
   * After the directory `real` was created: it must still be that real path (nothing swapped in
   * a symlink meanwhile).
   */
  async recheck(real: string, field: string): Promise<void> {
    const now = await realpath(real).catch(() => undefined);
    if (now !== real)
      throw AgentError.invalid(`${field}: file://${real} changed while it was written`, {
        field,
        reason: OUTSIDE_EXPORT_ROOTS,
      });
  }
}

/** The real path of `path`: its longest existing prefix resolved, the rest appended. */
async function realOf(path: string): Promise<string> {
  const parts = path.split(sep).filter(Boolean);
  const rest: string[] = [];
  for (;;) {
    const prefix = sep + parts.join(sep);
    try {
      const real = await realpath(prefix);
      return rest.length === 0 ? real : join(real, ...rest);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parts.length === 0) throw err;
      rest.unshift(parts.pop() as string);
    }
  }
}

/** Refuses when the root, or a directory between it and `real` that exists, is writable by group or others. */
async function refuseShared(
  realRoot: string,
  real: string,
  refuse: (why: string) => AgentError,
): Promise<void> {
  const below = real.slice(realRoot.length).split(sep).filter(Boolean);
  let dir = realRoot;
  for (let i = 0; ; i++) {
    let s: Awaited<ReturnType<typeof stat>>;
    try {
      s = await lstat(dir);
    } catch {
      return;
    }
    if (!s.isDirectory()) throw refuse(`is not a directory (${dir} is not)`);
    if ((s.mode & 0o022) !== 0)
      throw refuse(`is refused: ${dir} is writable by group or others, who could swap in a symlink`);
    const next = below[i];
    if (next === undefined) return;
    dir = join(dir, next);
  }
}
