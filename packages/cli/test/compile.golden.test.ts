import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { REPO_ROOT, runOrch } from './run-orch.js';

/**
 * Golden outputs of `orch compile` over the shipped examples, for every output mode. Regenerate
 * after an intended change with `UPDATE_GOLDEN=1 npx vitest run packages/cli`, then review the diff.
 */
const GOLDEN = join(REPO_ROOT, 'packages/cli/test/golden');
const EXAMPLES: readonly [name: string, extra: readonly string[]][] = [
  ['small', []],
  ['python', []],
  ['full', []],
  ['services-secrets', []],
  ['gpu', []],
  ['mig', []],
  ['from-build', ['--from-build', 'snap-0f3a9c']],
];
const MODES: readonly [name: string, args: readonly string[]][] = [
  ['text', []],
  ['format-text', ['--format', 'text']],
  ['json', ['--format', 'json']],
  ['yaml', ['--format', 'yaml']],
  ['output-json', ['-o', 'json']],
  ['only-spec', ['--only', 'spec']],
  ['only-startup-script', ['--only', 'startup-script']],
  ['only-manifest', ['--only', 'manifest']],
  ['only-expose', ['--only', 'expose']],
  ['only-secrets', ['--only', 'secrets']],
];

function golden(file: string, actual: string): void {
  const path = join(GOLDEN, file);
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, actual);
  }
  expect(actual).toBe(readFileSync(path, 'utf8'));
}

describe.each(EXAMPLES)('examples/%s', (example, extra) => {
  test.each(MODES)('%s', (mode, args) => {
    const argv = ['compile', `examples/${example}/orch.yaml`, ...extra, ...args];
    const first = runOrch(argv);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    golden(`${example}/${mode}.out`, first.stdout);
    // Byte-identical across runs, and `up --dry-run` prints the same through the same code.
    expect(runOrch(argv).stdout).toBe(first.stdout);
    expect(runOrch(['up', '--dry-run', ...argv.slice(1)]).stdout).toBe(first.stdout);
  });
});

test('-o json and --format json are the same body; --format wins over -o', () => {
  const file = 'examples/full/orch.yaml';
  const json = runOrch(['compile', file, '--format', 'json']).stdout;
  expect(runOrch(['-o', 'json', 'compile', file]).stdout).toBe(json);
  expect(runOrch(['compile', file, '-o', 'json', '--format', 'text']).stdout).toBe(
    runOrch(['compile', file]).stdout,
  );
});

test('JSON body: secrets empty, required_secrets added, manifest_inline decodes to --only manifest', () => {
  const file = 'examples/services-secrets/orch.yaml';
  const body = JSON.parse(runOrch(['compile', file, '--format', 'json']).stdout);
  expect(body.secrets).toEqual({});
  expect(body.required_secrets).toEqual(['db_pw', 'stripe_key']);
  expect(Buffer.from(body.manifest_inline, 'base64').toString('utf8')).toBe(
    runOrch(['compile', file, '--only', 'manifest']).stdout,
  );
});
