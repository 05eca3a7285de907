import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runBin } from '@support/server/testing';
import { afterAll, expect, test } from 'vitest';
import { OrchdProcess, tempDataDir } from './orchd-process.js';

const ORCHD = fileURLToPath(new URL('../bin/orchd.js', import.meta.url));
const run = (args: string[], env: Record<string, string>) => runBin(ORCHD, args, env);

test('orchd --help lists every flag and variable', () => {
  const r = run(['--help'], {});
  expect(r.status).toBe(0);
  for (const name of [
    '--port',
    'ORCH_PORT',
    '--auth-token',
    'ORCH_AUTH_TOKEN',
    'DATABASE_URL',
    'ORCH_REQUIRE_AUTH',
    'ORCH_SECURE_COOKIES',
    'TOKEN_ENCRYPTION_KEY',
    'MICROVM_AGENT_TOKEN',
    'ORCH_DATA_DIR',
    'ORCH_ALLOWED_CIDRS',
    '--host',
    'ORCH_HOST',
    '--reconcile-interval-sec',
    'ORCH_RECONCILE_INTERVAL_SEC',
  ]) {
    expect(r.stdout).toContain(name);
  }
});

test('orchd refuses to start on invalid configuration, naming every problem, with exit status 2', () => {
  const r = run(['--port', 'x'], { ORCH_REQUIRE_AUTH: 'true', TOKEN_ENCRYPTION_KEY: 'nope' });
  expect(r.status).toBe(2);
  expect(r.stderr).toBe(
    'orchd: invalid configuration:\n' +
      '  - ORCH_PORT (--port): Invalid input: expected number, received NaN\n' +
      '  - TOKEN_ENCRYPTION_KEY: must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)\n' +
      '  - ORCH_REQUIRE_AUTH (--require-auth), ORCH_AUTH_TOKEN (--auth-token): true needs a master token: set ORCH_AUTH_TOKEN or --auth-token\n',
  );
  expect(r.stdout).toBe('');
  const unknown = run(['--listen', '0.0.0.0'], {});
  expect(unknown.status).toBe(2);
  expect(unknown.stderr).toContain("unknown option '--listen'");
});

const data = tempDataDir();
afterAll(() => data.cleanup());

test('a token-encryption key other than the one the store was set up with is refused', async () => {
  const first = await OrchdProcess.start({ ORCH_DATA_DIR: data.dir, TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32) });
  // The version, from package.json: GET /v1/info (no credentials) and the listening log line.
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  expect((await first.request('GET', '/v1/info')).body).toEqual({ service: 'orchd', version });
  expect(first.output.find((l) => l.includes('"msg":"orchd listening"'))).toContain(`"version":"${version}"`);
  expect(await first.stop()).toBe(0);
  const r = run([], {
    ORCH_DATA_DIR: data.dir,
    ORCH_PORT: '0',
    TOKEN_ENCRYPTION_KEY: 'cd'.repeat(32),
    ORCH_LOG_LEVEL: 'silent',
  });
  expect(r.status).toBe(1);
  expect(r.stderr).toContain('TOKEN_ENCRYPTION_KEY is not the key this database was set up with');
});

test('--version prints the version of its package.json, status 0', () => {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  for (const flag of ['--version', '-V']) {
    const r = run([flag], {});
    expect([r.status, r.stdout]).toEqual([0, `${version}\n`]);
  }
});
