import { Command } from 'commander';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { addOptions, ConfigError, declareOptions, flagValues, loadOptions } from './options.js';
import { configProblems } from './testing.js';

const OPTIONS = declareOptions({
  port: {
    env: 'X_PORT',
    flag: '--port <port>',
    schema: z.coerce.number().int().min(0).max(65535).default(8080),
    description: 'TCP port',
  },
  host: {
    env: 'X_HOST',
    envAliases: ['X_LISTEN'],
    flag: '--host <host>',
    schema: z.string().min(1).default('127.0.0.1'),
    description: 'address to listen on',
  },
  pollMs: {
    env: 'X_POLL_MS',
    flag: '--poll-ms <ms>',
    schema: z.coerce.number().int().min(10).default(500),
    description: 'poll interval',
  },
  mode: {
    env: 'X_MODE',
    flag: '--mode <on|off>',
    schema: z.enum(['on', 'off']).default('on'),
    description: 'mode',
  },
  secret: {
    env: 'X_SECRET',
    schema: z.string().min(8).optional(),
    description: 'a secret, environment only',
    secret: true,
  },
});

describe('loadOptions', () => {
  test('flags win over the environment, which wins over defaults; empty variables are unset', () => {
    const v = loadOptions(OPTIONS, {
      flags: { port: '9000' },
      env: { X_PORT: '1', X_POLL_MS: '', X_LISTEN: '0.0.0.0', X_SECRET: 'longenough' },
    });
    expect(v).toEqual({ port: 9000, host: '0.0.0.0', pollMs: 500, mode: 'on', secret: 'longenough' });
  });

  test('reports every problem at once, each named by variable and flag', () => {
    const found = configProblems(() =>
      loadOptions(
        OPTIONS,
        { env: { X_PORT: 'x', X_POLL_MS: '1', X_MODE: 'maybe', X_SECRET: 'short' } },
        (v, problem) => {
          if (v.mode === undefined) problem(['mode', 'secret'], 'cross-check sees the partial values');
        },
      ),
    );
    expect(found).toHaveLength(5);
    expect(found[0]).toMatch(/^X_PORT \(--port\): /);
    expect(found[1]).toMatch(/^X_POLL_MS \(--poll-ms\): /);
    expect(found[2]).toMatch(/^X_MODE \(--mode\): /);
    expect(found[3]).toMatch(/^X_SECRET: /);
    expect(found[4]).toBe('X_MODE (--mode), X_SECRET: cross-check sees the partial values');
    const err = new ConfigError(found);
    expect(err.message.split('\n')).toHaveLength(6);
  });
});

describe('addOptions', () => {
  test('one flag per declared option, help with defaults and variables, secrets without their value', () => {
    const cmd = addOptions(new Command('x').exitOverride(), OPTIONS);
    let help = '';
    cmd.configureOutput({ writeOut: (s) => (help += s) });
    cmd.outputHelp();
    for (const [flag, env] of [
      ['--port <port>', 'X_PORT'],
      ['--host <host>', 'X_HOST'],
      ['--poll-ms <ms>', 'X_POLL_MS'],
      ['--mode <on|off>', 'X_MODE'],
    ]) {
      const line = help.split('\n').find((l) => l.includes(flag!));
      expect(line, flag).toBeDefined();
      expect(line).toContain(`[env ${env}]`);
    }
    expect(help).toContain('(default: 8080)');
    expect(help).toContain('X_SECRET');
    expect(help).not.toContain('--secret');
    cmd.parse(['--poll-ms', '20', '--mode', 'off'], { from: 'user' });
    expect(flagValues(cmd, OPTIONS)).toEqual({ pollMs: '20', mode: 'off' });
  });
});
