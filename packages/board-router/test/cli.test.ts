/**
 * The `board-router` binary's exit statuses, the same rules as every server program: 0 for
 * `--help`, 2 for configuration (every problem at once), 1 when it cannot start.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { runBin } from '@support/server/testing';
import { expect, test } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/board-router.js', import.meta.url));
const run = (args: string[], env: Record<string, string> = {}) => runBin(BIN, args, env);

test('--help: status 0, every flag with its variable', () => {
  const r = run(['--help']);
  expect(r.status).toBe(0);
  for (const name of [
    '--nodes',
    'BOARD_ROUTER_NODES',
    '--host',
    'BOARD_ROUTER_HOST',
    '--request-timeout-ms',
  ]) {
    expect(r.stdout).toContain(name);
  }
});

test('configuration problems: status 2, every problem at once', () => {
  const r = run(['--hedge-budget', '2'], { BOARD_ROUTER_PORT: 'x', BOARD_ROUTER_HEALTH_INTERVAL_MS: '1' });
  expect(r.status).toBe(2);
  expect(r.stderr.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
    expect.stringMatching(/^ {2}- BOARD_ROUTER_NODES \(--nodes\): /),
    expect.stringMatching(/^ {2}- BOARD_ROUTER_PORT \(--port\): /),
    expect.stringMatching(/^ {2}- BOARD_ROUTER_HEDGE_BUDGET \(--hedge-budget\): /),
    expect.stringMatching(/^ {2}- BOARD_ROUTER_HEALTH_INTERVAL_MS \(--health-interval-ms\): /),
  ]);
  expect(r.stdout).toBe('');
  expect(run(['--listen', '1']).status).toBe(2);
});

test('a port already taken: status 1, saying why', async () => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  try {
    const port = (blocker.address() as { port: number }).port;
    const r = run(['--port', String(port), '--nodes', 'http://127.0.0.1:1', '--health-timeout-ms', '200']);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('EADDRINUSE');
  } finally {
    blocker.close();
  }
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
