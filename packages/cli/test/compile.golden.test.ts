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
  // `image` kept as what the artifact was built on: spec.image beside seed_snapshot_id.
  ['build', ['--from-build', 'snap-0f3a9c', '--image-is-base']],
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
    const first = runOrch(['compile', `examples/${example}/orch.yaml`, ...extra, ...args]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    golden(`${example}/${mode}.out`, first.stdout);
  });
});

/**
 * Byte-identical across runs, and `up --dry-run` prints the same through the same code: every mode
 * of the fullest example, and every example in the mode `up` posts (JSON). A second run is compared
 * with the golden file the first run matched. Not every pair: each is two more `orch` start-ups,
 * and the modes are the same code for every example.
 */
const REPEATED: readonly (readonly [example: string, mode: string, args: readonly string[]])[] = [
  ...MODES.map(([mode, args]) => ['full', mode, args] as const),
  ...EXAMPLES.filter(([example]) => example !== 'full').map(
    ([example, extra]) => [example, 'json', [...extra, '--format', 'json']] as const,
  ),
];

test.each(REPEATED)('examples/%s %s: the same bytes again, and from up --dry-run', (example, mode, args) => {
  const expected = readFileSync(join(GOLDEN, `${example}/${mode}.out`), 'utf8');
  const file = `examples/${example}/orch.yaml`;
  expect(runOrch(['compile', file, ...args]).stdout).toBe(expected);
  const dryRun = runOrch(['up', '--dry-run', file, ...args]);
  expect(dryRun.stderr).toBe('');
  expect(dryRun.stdout).toBe(expected);
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
