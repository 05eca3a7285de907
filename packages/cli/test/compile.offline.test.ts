import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ORCH_BIN, runOrch } from './run-orch.js';

/**
 * Compile rule 1: no HTTP request, no context, no network. strace records every system call of
 * the process and its children that opens or uses a socket (socket, connect, sendto, ...); the list
 * must be empty. (Queries on inherited stdio, such as getsockname, are not opening anything.)
 * Needs strace (installed by the test command); under CI its absence fails the suite.
 */
const hasStrace = spawnSync('strace', ['-V']).status === 0;
if (!hasStrace && process.env.CI === 'true')
  throw new Error('strace is required for the offline test under CI');

const dir = mkdtempSync(join(tmpdir(), 'orch-offline-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function networkCalls(args: readonly string[], name: string): { code: number | null; calls: string[] } {
  const trace = join(dir, `${name}.trace`);
  const r = spawnSync(
    'strace',
    [
      '-f',
      '-qq',
      '-e',
      'trace=socket,socketpair,connect,bind,listen,accept,accept4,sendto,sendmsg,sendmmsg',
      '-o',
      trace,
      ...args,
    ],
    {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
    },
  );
  if (r.error) throw r.error;
  return { code: r.status, calls: readFileSync(trace, 'utf8').split('\n').filter(Boolean) };
}

describe.skipIf(!hasStrace)('orch compile opens no socket', () => {
  test('the detector sees a socket when a process opens one', () => {
    const r = networkCalls(
      [process.execPath, '-e', "require('net').connect(9, '127.0.0.1').on('error', () => {})"],
      'control',
    );
    expect(r.calls.some((c) => c.includes('socket(') && c.includes('AF_INET'))).toBe(true);
  });

  test.each([
    ['text', ['compile', 'examples/services-secrets/orch.yaml']],
    ['json', ['compile', 'examples/full/orch.yaml', '--format', 'json']],
    ['yaml + from-build', ['compile', 'examples/from-build', '--from-build', 's1', '--format', 'yaml']],
    ['up --dry-run', ['up', '--dry-run', 'examples/gpu/orch.yaml']],
    ['diagnostics', ['compile', '--task-id', 'x', '-f', 'packages/cli/test/fixtures/bad/orch.yaml']],
  ])('%s', (name, args) => {
    const r = networkCalls([process.execPath, ORCH_BIN, ...args], name.replace(/\W/g, '-'));
    expect(r.calls).toEqual([]);
    expect(r.code).toBe(name === 'diagnostics' ? 1 : 0);
  });
});

test('compile needs no config file, no HOME and no orchestrator', () => {
  const r = runOrch(['compile', 'examples/small/orch.yaml', '--format', 'json']);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout).task_id).toBe('small');
});
