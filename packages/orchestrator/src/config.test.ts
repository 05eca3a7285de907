import { addOptions } from '@support/server';
import { configProblems } from '@support/server/testing';
import { Command } from 'commander';
import { describe, expect, test } from 'vitest';
import { loadConfig, OPTIONS, type RawOptions } from './config.js';

const problems = (flags: RawOptions, env: Record<string, string>) =>
  configProblems(() => loadConfig(flags, env));

describe('orchd configuration', () => {
  test('defaults', () => {
    expect(loadConfig({}, {})).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      authToken: '',
      databaseUrl: '',
      requireAuth: false,
      dataDir: '.data/orchd',
      hostHealthIntervalSec: 15,
      reconcileIntervalSec: 5,
      agentTimeoutSec: 30,
      createTimeoutSec: 300,
      loginMaxFailures: 10,
      loginMaxFailuresAll: 100,
      loginWindowSec: 60,
    });
  });

  test('flags win over environment variables', () => {
    const c = loadConfig({ port: '9000', authToken: 'flag' }, { ORCH_PORT: '1', ORCH_AUTH_TOKEN: 'env' });
    expect(c.port).toBe(9000);
    expect(c.authToken).toBe('flag');
  });

  test('the renamed variables are still read: ORCH_LISTEN, ORCH_RECONCILE_INTERVAL and friends', () => {
    const c = loadConfig(
      {},
      {
        ORCH_LISTEN: '0.0.0.0',
        ORCH_HOST_HEALTH_INTERVAL: '2',
        ORCH_RECONCILE_INTERVAL: '3',
        ORCH_AGENT_TIMEOUT: '4',
        ORCH_CREATE_TIMEOUT: '50',
      },
    );
    expect(c).toMatchObject({
      host: '0.0.0.0',
      hostHealthIntervalSec: 2,
      reconcileIntervalSec: 3,
      agentTimeoutSec: 4,
      createTimeoutSec: 50,
    });
    expect(loadConfig({}, { ORCH_HOST: '::1', ORCH_LISTEN: '0.0.0.0' }).host).toBe('::1');
  });

  test('TOKEN_ENCRYPTION_KEY as base64 or hex', () => {
    const b64 = loadConfig({}, { TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') });
    const hex = loadConfig({}, { TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32) });
    expect(b64.tokenEncryptionKey?.length).toBe(32);
    expect(hex.tokenEncryptionKey?.equals(Buffer.alloc(32, 0xab))).toBe(true);
  });

  const KEY_PROBLEM =
    'TOKEN_ENCRYPTION_KEY: must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)';
  test.each([
    [
      { ORCH_REQUIRE_AUTH: 'true' },
      'ORCH_REQUIRE_AUTH (--require-auth), ORCH_AUTH_TOKEN (--auth-token): true needs a master token: set ORCH_AUTH_TOKEN or --auth-token',
    ],
    [{ TOKEN_ENCRYPTION_KEY: 'short' }, KEY_PROBLEM],
    [{ TOKEN_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64') }, KEY_PROBLEM],
    [
      { DATABASE_URL: 'postgres://x/y' },
      expect.stringContaining('TOKEN_ENCRYPTION_KEY is required with DATABASE_URL'),
    ],
    [
      { DATABASE_URL: 'mysql://x/y', TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32) },
      'DATABASE_URL (--database-url): must be a postgres:// or postgresql:// URL',
    ],
    [{ ORCH_PORT: '70000' }, expect.stringMatching(/^ORCH_PORT \(--port\): /)],
    [
      { ORCH_REQUIRE_AUTH: 'maybe' },
      'ORCH_REQUIRE_AUTH (--require-auth): must be true or false, got "maybe"',
    ],
    [
      { ORCH_ALLOWED_CIDRS: '10.0.0.0/8,example.com' },
      'ORCH_ALLOWED_CIDRS (--allowed-cidrs): entry "example.com" is not a CIDR like 10.0.0.0/8',
    ],
    [
      { ORCH_LOGIN_MAX_FAILURES: '-1' },
      expect.stringMatching(/^ORCH_LOGIN_MAX_FAILURES \(--login-max-failures\): /),
    ],
    [
      { ORCH_LOGIN_WINDOW_SEC: '0' },
      expect.stringMatching(/^ORCH_LOGIN_WINDOW_SEC \(--login-window-sec\): /),
    ],
    [
      { ORCH_CREATE_TIMEOUT_SEC: '1' },
      expect.stringMatching(/^ORCH_CREATE_TIMEOUT_SEC \(--create-timeout-sec\): /),
    ],
  ])('refuses %j', (env, problem) => {
    expect(problems({}, env as Record<string, string>)).toEqual([problem]);
  });

  test('every problem at once', () => {
    expect(
      problems(
        { port: 'x' },
        { ORCH_REQUIRE_AUTH: 'true', TOKEN_ENCRYPTION_KEY: 'x', ORCH_AGENT_TIMEOUT_SEC: '0' },
      ),
    ).toHaveLength(4);
  });

  test('--help lists every option with its variable; secrets without a value', () => {
    let help = '';
    const cmd = addOptions(new Command('orchd'), OPTIONS).configureOutput({ writeOut: (s) => (help += s) });
    cmd.outputHelp();
    for (const o of Object.values(OPTIONS)) {
      expect(help, o.env).toContain(o.env);
      if ('flag' in o) expect(help, o.env).toContain(o.flag);
    }
    expect(help).toContain('(default: 8080)');
    expect(help).not.toMatch(/ORCH_AUTH_TOKEN.*default/);
  });
});
