import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './run-cli.js';

/** One command of a README console block, with the output the README shows for it. */
export interface ReadmeStep {
  /** The words after `$ ` (no quoting in these blocks: split on spaces). */
  readonly argv: string[];
  readonly output: string;
}

/**
 * The console block of the CLI README's "Build, then run" section: its commands (lines starting
 * `$ `) in order, each with the lines it printed. The tests run them and compare with
 * {@link masked}, so the README cannot drift from what `orch` prints.
 */
export function buildThenRunSteps(): ReadmeStep[] {
  const readme = readFileSync(join(REPO_ROOT, 'packages/cli/README.md'), 'utf8');
  const section = readme.split('\n## Build, then run\n')[1];
  const block = section && /```console\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('packages/cli/README.md has no console block under "## Build, then run"');
  const steps: { argv: string[]; output: string[] }[] = [];
  for (const line of block.trimEnd().split('\n')) {
    if (line.startsWith('$ ')) steps.push({ argv: line.slice(2).split(' '), output: [] });
    else steps.at(-1)?.output.push(line);
  }
  return steps.map((s) => ({ argv: s.argv, output: s.output.map((l) => `${l}\n`).join('') }));
}

/**
 * `text` with what differs between runs replaced by placeholders: record ids, ISO times, step
 * durations (with their padding), 12-digit layer key prefixes, the host an environment is on, URLs.
 */
export function masked(text: string): string {
  return text
    .replace(/\b(bld|snap|env)_[A-Za-z0-9_-]{16}/g, '$1_<id>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/ +\d+\.\ds {2}[0-9a-f]{12} {2}/g, ' <secs>  <key>  ')
    .replace(/ on [a-z0-9][a-z0-9-]*/g, ' on <host>')
    .replace(/http:\/\/[^\s/]+/g, '<url>');
}
