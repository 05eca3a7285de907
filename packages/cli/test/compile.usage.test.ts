import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { runOrch } from './run-orch.js';

const root = mkdtempSync(join(tmpdir(), 'orch-usage-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A fresh project directory holding the given files. */
function project(name: string, files: Record<string, string>): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

const taskIdOf = (stdout: string) => JSON.parse(stdout).task_id as string;

describe('usage errors exit 2', () => {
  test.each([
    [['compile', '--bogus'], "unknown option '--bogus'"],
    [
      ['compile', 'examples/small', '--only', 'spec', '--format', 'json'],
      '--only and --format cannot be used together',
    ],
    [['compile', 'examples/small', '--format', 'xml'], "argument 'xml' is invalid"],
    [['compile', 'examples/small', '--only', 'everything'], "argument 'everything' is invalid"],
    [['-o', 'yaml', 'compile', 'examples/small'], "argument 'yaml' is invalid"],
    [['compile', 'examples/small', '--task-id', ''], '--task-id must not be empty'],
    [['compile', 'examples/small', '--from-build', ' '], '--from-build snapshot id must not be empty'],
    [
      ['compile', 'examples/small', '--from-build', '../x'],
      '--from-build snapshot id must be 1-63 letters, digits, "_" or "-", starting with a letter or digit',
    ],
    [['compile', 'a', 'b'], 'too many arguments'],
    [['compile', 'examples/build', '--image-is-base'], '--image-is-base needs --from-build'],
    [['up', 'examples/build', '--image-is-base', '--dry-run'], '--image-is-base needs --from-build'],
    // Without --dry-run, up prints the environment it created: --format and --only would be ignored.
    [['up', 'examples/small', '--format', 'json'], '--format and --only apply to up only with --dry-run'],
    [['up', 'examples/small', '--only', 'spec'], '--format and --only apply to up only with --dry-run'],
    [['nope'], "unknown command 'nope'"],
  ])('%j', (args, message) => {
    const r = runOrch(args);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(message);
  });
});

describe('diagnostics exit 1, all together, as file:line:col: message', () => {
  test('a file with several problems', () => {
    const r = runOrch(['compile', 'packages/cli/test/fixtures/bad/orch.yaml']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n').filter(Boolean)).toEqual([
      'packages/cli/test/fixtures/bad/orch.yaml:1:10: version 2 is not supported: the only version is 1',
      'packages/cli/test/fixtures/bad/orch.yaml:3:3: unknown field "cpu" in resources (did you mean "cpus"?)',
      'packages/cli/test/fixtures/bad/orch.yaml:4:11: malformed size "2 GiB" for resources.memory: write <integer><unit> with no space, unit one of MiB, GiB, TiB, MB, GB, TB, greater than zero (for example 2GiB)',
    ]);
  });

  test('image with --from-build', () => {
    const r = runOrch(['compile', 'examples/full', '--from-build', 'snap-1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'examples/full/orch.yaml:3:1: image cannot be used with --from-build: a build artifact and an image both name the rootfs to boot; remove image, or pass --image-is-base if it is the image the artifact was built on\n',
    );
  });
});

describe('path resolution: -f, then the positional path, then discovery', () => {
  const valid = 'version: 1\n';
  test('discovers orch.yaml before orch.yml in the working directory', () => {
    const dir = project('both', { 'orch.yaml': valid, 'orch.yml': 'version: 2\n' });
    const r = runOrch(['compile', '--format', 'json'], dir);
    expect(r.code).toBe(0);
    expect(taskIdOf(r.stdout)).toBe('both');
  });

  test('discovers orch.yml when it is the only one, and names it in diagnostics', () => {
    const dir = project('yml', { 'orch.yml': 'version: 2\n' });
    const r = runOrch(['compile'], dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('orch.yml:1:10: version 2 is not supported: the only version is 1\n');
  });

  test('no definition file names the files it looked for', () => {
    const dir = project('empty', {});
    const r = runOrch(['compile'], dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'orch: no definition file in the working directory: looked for orch.yaml, orch.yml\n',
    );
  });

  test('a positional directory is searched the same way; task id is its name', () => {
    project('svc', { 'orch.yml': valid });
    const r = runOrch(['compile', 'svc', '--format', 'json'], root);
    expect(r.code).toBe(0);
    expect(taskIdOf(r.stdout)).toBe('svc');
  });

  test('-f wins over the positional path', () => {
    project('a', { 'orch.yaml': valid });
    project('b', { 'orch.yaml': valid });
    const r = runOrch(['compile', 'a', '-f', 'b/orch.yaml', '--format', 'json'], root);
    expect(taskIdOf(r.stdout)).toBe('b');
  });

  test('--task-id wins over the directory name', () => {
    const r = runOrch(['compile', 'examples/small', '--task-id', 'my-task', '--format', 'json']);
    expect(taskIdOf(r.stdout)).toBe('my-task');
  });

  test('a missing file is a clear error', () => {
    const r = runOrch(['compile', '-f', 'missing.yaml']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('orch: cannot read definition file missing.yaml: no such file\n');
  });
});

test('up without --dry-run needs an orchestrator context, and says how to make one', () => {
  const r = runOrch(['up', 'examples/small']);
  expect(r.code).toBe(1);
  expect(r.stdout).toBe('');
  expect(r.stderr).toBe('orch: no orchestrator context: run `orch connect <url> --token <token>` first\n');
});

test('up refuses to send anything while a required secret is missing', () => {
  const r = runOrch(['up', 'examples/services-secrets', '--secret', 'db_pw=x']);
  expect(r.code).toBe(1);
  expect(r.stderr).toBe(
    'orch: missing secrets: stripe_key: pass --secret NAME=VALUE or --secrets-file FILE (nothing was sent)\n',
  );
});

test('orch --version prints the version of its package.json, status 0', () => {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  for (const flag of ['--version', '-V'])
    expect(runOrch([flag])).toMatchObject({ code: 0, stdout: `${version}\n` });
});

describe('help lists every flag, one line each', () => {
  const flagLines = (help: string) => help.split('\n').filter((l) => /^\s+-/.test(l));
  test('orch --help', () => {
    const r = runOrch(['--help']);
    expect(r.code).toBe(0);
    expect(flagLines(r.stdout).map((l) => l.trim().split(/\s{2,}/)[0])).toEqual([
      '-V, --version',
      '-o, --output <mode>',
      '-h, --help',
    ]);
  });

  test.each(['compile', 'up'])('orch %s --help', (command) => {
    const r = runOrch([command, '--help']);
    expect(r.code).toBe(0);
    const lines = flagLines(r.stdout);
    const flags = lines.map((l) => l.trim().split(/\s{2,}/)[0]);
    expect(flags).toEqual([
      '-f, --file <path>',
      '--task-id <id>',
      '--format <format>',
      '--only <part>',
      '--from-build <snapshot-id>',
      '--image-is-base',
      ...(command === 'up'
        ? ['--dry-run', '--secret <NAME=VALUE...>', '--secrets-file <file>', '--detach']
        : []),
      '-h, --help',
      '-V, --version',
      '-o, --output <mode>',
    ]);
    // Every flag line carries its description, and nothing wraps onto a continuation line.
    for (const l of lines) expect(l.trim().split(/\s{2,}/)).toHaveLength(2);
    expect(r.stdout.split('\n').filter((l) => /^\s{10,}\S/.test(l))).toEqual([]);
  });
});
