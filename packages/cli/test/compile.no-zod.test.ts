import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import { ORCH_BIN, REPO_ROOT } from './run-orch.js';

/**
 * `orch compile` loads no zod (its start-up is measured; `@orch/envdef` takes its rules from the
 * zod-free `@orch/protocol/rules`). The bundle (scripts/build.mjs: one entry, code splitting) puts
 * zod, with the schemas of `@orch/protocol`, in a chunk of its own; a module hook records every file
 * the process loads, and none may be that chunk. A command that talks to an orchestrator loads it,
 * which shows the detector sees it.
 */

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const REGISTER = fileURLToPath(new URL('./fixtures/trace-imports/register.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'orch-imports-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The files of the CLI bundle that hold zod (its error class is named in them). */
const zodChunks = () =>
  readdirSync(DIST).filter(
    (f) => f.endsWith('.js') && readFileSync(join(DIST, f), 'utf8').includes('ZodError'),
  );

/** The bundle files `orch <args>` loads. */
function loadedFiles(args: readonly string[], name: string): { code: number | null; files: string[] } {
  const trace = join(dir, `${name}.txt`);
  const r = spawnSync(process.execPath, ['--import', REGISTER, ORCH_BIN, ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: '/nonexistent',
      XDG_CONFIG_HOME: dir,
      ORCH_TRACE_IMPORTS: trace,
    },
  });
  if (r.error) throw r.error;
  const urls = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  const files = urls.flatMap((u) => (u.startsWith('file:') ? [fileURLToPath(u)] : []));
  return { code: r.status, files: files.filter((f) => f.startsWith(DIST)).map((f) => f.slice(DIST.length)) };
}

test('the bundle has zod in a chunk of its own', () => {
  expect(zodChunks()).toHaveLength(1);
  expect(zodChunks()).not.toContain('orch.js');
});

test.each([
  ['compile', ['compile', 'examples/services-secrets/orch.yaml']],
  ['compile --format json', ['compile', 'examples/full/orch.yaml', '--format', 'json']],
  [
    'compile with diagnostics',
    ['compile', '--task-id', 'x', '-f', 'packages/cli/test/fixtures/bad/orch.yaml'],
  ],
  ['up --dry-run', ['up', '--dry-run', 'examples/gpu/orch.yaml']],
])('orch %s loads no zod', (name, args) => {
  const r = loadedFiles(args, name.replace(/\W/g, '-'));
  expect(r.code).toBe(name.includes('diagnostics') ? 1 : 0);
  expect(r.files).toContain('orch.js');
  expect(r.files.filter((f) => zodChunks().includes(f))).toEqual([]);
});

test('the detector sees zod where it is loaded: a command that calls the API', () => {
  // No context: it fails before any request, after loading the API client and its schemas.
  const r = loadedFiles(['host', 'list'], 'host-list');
  expect(r.code).toBe(1);
  expect(r.files.filter((f) => zodChunks().includes(f))).toEqual(zodChunks());
});
