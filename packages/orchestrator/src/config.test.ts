import { describe, expect, test } from 'vitest';
import { ConfigError, helpText, loadConfig, OPTIONS } from './config.js';

function problems(argv: string[], env: Record<string, string>): readonly string[] {
  try {
    loadConfig(argv, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('orchd configuration', () => {
  test('defaults', () => {
    const r = loadConfig([], {});
    expect(r.help).toBe(false);
    if (r.help) return;
    expect(r.config).toMatchObject({
      port: 8080,
      listen: '127.0.0.1',
      authToken: '',
      databaseUrl: '',
      requireAuth: false,
      dataDir: '.data/orchd',
    });
  });

  test('flags win over environment variables', () => {
    const r = loadConfig(['--port', '9000', '--auth-token', 'flag'], {
      ORCH_PORT: '1',
      ORCH_AUTH_TOKEN: 'env',
    });
    expect(!r.help && r.config.port).toBe(9000);
    expect(!r.help && r.config.authToken).toBe('flag');
  });

  test('TOKEN_ENCRYPTION_KEY as base64 or hex', () => {
    const b64 = loadConfig([], { TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') });
    const hex = loadConfig([], { TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32) });
    expect(!b64.help && b64.config.tokenEncryptionKey?.length).toBe(32);
    expect(!hex.help && hex.config.tokenEncryptionKey?.equals(Buffer.alloc(32, 0xab))).toBe(true);
  });

  test.each([
    [
      { ORCH_REQUIRE_AUTH: 'true' },
      'ORCH_REQUIRE_AUTH=true needs a master token: set ORCH_AUTH_TOKEN or --auth-token',
    ],
    [
      { TOKEN_ENCRYPTION_KEY: 'short' },
      'TOKEN_ENCRYPTION_KEY must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)',
    ],
    [
      { TOKEN_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64') },
      'TOKEN_ENCRYPTION_KEY must be 32 bytes as base64 or 64 hex characters (generate one: openssl rand -base64 32)',
    ],
    [
      { DATABASE_URL: 'postgres://x/y' },
      expect.stringContaining('TOKEN_ENCRYPTION_KEY is required with DATABASE_URL'),
    ],
    [
      { DATABASE_URL: 'mysql://x/y', TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32) },
      'DATABASE_URL must be a postgres:// or postgresql:// URL',
    ],
    [{ ORCH_PORT: '70000' }, expect.stringMatching(/^ORCH_PORT: /)],
    [{ ORCH_REQUIRE_AUTH: 'maybe' }, 'ORCH_REQUIRE_AUTH must be true or false, got "maybe"'],
    [
      { ORCH_ALLOWED_CIDRS: '10.0.0.0/8,example.com' },
      'ORCH_ALLOWED_CIDRS entry "example.com" is not a CIDR like 10.0.0.0/8',
    ],
  ])('refuses %j', (env, problem) => {
    expect(problems([], env as Record<string, string>)).toEqual([problem]);
  });

  test('every problem at once', () => {
    expect(problems([], { ORCH_REQUIRE_AUTH: 'true', TOKEN_ENCRYPTION_KEY: 'x' })).toHaveLength(2);
  });

  test('unknown flags are refused', () => {
    expect(problems(['--prot', '1'], {})[0]).toMatch(/Unknown option '--prot'/);
  });

  test('--help lists every option, one line each', () => {
    const help = helpText();
    for (const o of OPTIONS) {
      const lines = help.split('\n').filter((l) => new RegExp(`^  (--[a-z-]+, )?${o.env} `).test(l));
      expect(lines, o.env).toHaveLength(1);
      if (o.flag) expect(lines[0]).toContain(`--${o.flag}`);
    }
    expect(loadConfig(['--help'], {})).toEqual({ help: true });
  });
});
