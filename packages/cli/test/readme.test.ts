import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { REPO_ROOT, runOrch } from './run-orch.js';

/**
 * The README describes today's CLI: every command `orch --help` lists (walked down through each
 * command's own --help) has a row in a README table, and that row names every flag the command's
 * --help prints. A new command or flag fails here until the README says what it does.
 */
const README = readFileSync(join(REPO_ROOT, 'packages/cli/README.md'), 'utf8');

/** The entries of one section (`Commands:`, `Options:`) of a --help page: their first word or flag. */
function section(help: string, title: string): string[] {
  const lines = help.split('\n');
  const start = lines.indexOf(`${title}:`);
  if (start < 0) return [];
  const end = lines.findIndex((l, i) => i > start && !l.startsWith('  '));
  // An entry starts two spaces in; a longer description wraps onto lines indented further.
  return lines
    .slice(start + 1, end < 0 ? undefined : end)
    .filter((l) => /^ {2}\S/.test(l))
    .map((l) => l.trim().split(/\s{2,}/)[0]!);
}

/** Every leaf command, as its words after `orch`, with the long flags its --help lists. */
function leafCommands(path: readonly string[] = []): { path: string[]; flags: string[] }[] {
  const r = runOrch([...path, '--help']);
  expect(r.code, `orch ${path.join(' ')} --help`).toBe(0);
  const subcommands = section(r.stdout, 'Commands')
    .map((entry) => entry.split(' ')[0]!)
    .filter((name) => name !== 'help');
  if (subcommands.length > 0) return subcommands.flatMap((name) => leafCommands([...path, name]));
  const flags = section(r.stdout, 'Options')
    .map((entry) => /--[a-z-]+/.exec(entry)?.[0])
    .filter((flag): flag is string => flag !== undefined && flag !== '--help');
  return [{ path: [...path], flags }];
}

describe('the README describes every command and flag --help prints', () => {
  const leaves = leafCommands();

  test('the walk found the whole command tree', () => {
    expect(leaves.map((l) => l.path.join(' '))).toEqual(
      expect.arrayContaining([
        'compile',
        'up',
        'connect',
        'context use',
        'host register',
        'snapshot restore',
      ]),
    );
    expect(leaves.length).toBeGreaterThanOrEqual(24);
  });

  test('the global option', () => {
    expect(section(runOrch(['--help']).stdout, 'Options')).toEqual([
      '-V, --version',
      '-o, --output <mode>',
      '-h, --help',
    ]);
    expect(README).toContain('`-o, --output table|json`');
    expect(README).toContain('`-V, --version`');
  });

  test.each(leaves.map((l) => [l.path.join(' '), l.flags] as const))('orch %s', (command, flags) => {
    const row = README.split('\n').find((line) => new RegExp(`^\\| \`orch ${command}[ \`]`).test(line));
    expect(row, `a README table row for orch ${command}`).toBeDefined();
    for (const flag of flags) expect(row, `orch ${command} ${flag}`).toContain(flag);
  });
});
