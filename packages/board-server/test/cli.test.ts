/**
 * The `board-node` binary's exit statuses, the same rules as every server program: 0 for
 * `--help`, 2 for configuration (every problem at once; subcommands too), 1 when a command fails.
 * Configuration is refused before any store is opened, so no PostgreSQL is needed here.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runBin } from '@support/server/testing';
import { expect, test } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/board-node.js', import.meta.url));
const run = (args: string[], env: Record<string, string> = {}) => runBin(BIN, args, env);

test('--help: status 0, every flag with its variable, the subcommands', () => {
  const r = run(['--help']);
  expect(r.status).toBe(0);
  for (const name of ['--host', 'BOARD_HOST', '--poll-ms', 'BOARD_POLL_MS', 'board', 'token']) {
    expect(r.stdout).toContain(name);
  }
  expect(run(['token', 'mint', '--help']).stdout).toContain('--ttl <duration>');
});

test('configuration problems: status 2, every problem at once, for the server and its subcommands', () => {
  const r = run(['--poll-ms', '9000'], { BOARD_PORT: 'x', BOARD_TOKEN_SECRET: 'short' });
  expect(r.status).toBe(2);
  expect(r.stderr.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
    expect.stringMatching(/^ {2}- BOARD_PORT \(--port\): /),
    '  - BOARD_TOKEN_SECRET (--token-secret): must be at least 32 characters',
    expect.stringMatching(/^ {2}- BOARD_POLL_MS \(--poll-ms\): /),
  ]);
  const mint = run(['token', 'mint', '--board', 'b'], { BOARD_AUTH: 'off' });
  expect(mint.status).toBe(2);
  expect(mint.stderr).toContain('BOARD_TOKEN_SECRET');
  expect(run(['frobnicate']).stderr).toContain('unknown command "frobnicate"');
  expect(run(['frobnicate']).status).toBe(2);
  expect(run(['board', 'create']).status).toBe(2);
});

test('a command that fails: status 1 with the tag', () => {
  const r = run(['token', 'mint', '--board', 'b', '--verbs', 'fly'], { BOARD_TOKEN_SECRET: 's'.repeat(32) });
  expect(r.status).toBe(1);
  expect(r.stderr).toBe('board-node: InvalidInput: unknown verb "fly"\n');
});

test('--version prints the version of its package.json, status 0', () => {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  for (const flag of ['--version', '-V']) {
    const r = run([flag]);
    expect([r.status, r.stdout]).toEqual([0, `${version}\n`]);
  }
});
