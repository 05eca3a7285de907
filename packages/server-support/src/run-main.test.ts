import { Command } from 'commander';
import { describe, expect, test } from 'vitest';
import { ConfigError } from './options.js';
import { runMain } from './run-main.js';

function harness() {
  const out: string[] = [];
  const exits: number[] = [];
  return { out, exits, options: { write: (t: string) => out.push(t), exit: (c: number) => exits.push(c) } };
}

describe('runMain', () => {
  test('exit codes: 0 done, 2 configuration, 1 failure', async () => {
    const h = harness();
    expect(await runMain('p', async () => undefined, h.options)).toBe(0);
    expect(
      await runMain('p', async () => Promise.reject(new ConfigError(['A: bad', 'B: worse'])), h.options),
    ).toBe(2);
    expect(h.out.join('')).toBe('p: invalid configuration:\n  - A: bad\n  - B: worse\n');
    expect(await runMain('p', async () => Promise.reject(new Error('port in use')), h.options)).toBe(1);
    expect(h.out.at(-1)).toBe('p: port in use\n');
  });

  test('commander usage errors are configuration errors (2), --help is 0', async () => {
    const h = harness();
    const program = () =>
      new Command('p')
        .exitOverride()
        .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
        .option('--port <n>');
    expect(await runMain('p', () => program().parseAsync(['--nope'], { from: 'user' }), h.options)).toBe(2);
    expect(await runMain('p', () => program().parseAsync(['--help'], { from: 'user' }), h.options)).toBe(0);
  });

  test('SIGTERM aborts the signal and a clean stop is 0; a second signal forces 1', async () => {
    const h = harness();
    const code = runMain(
      'p',
      (signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve())),
      h.options,
    );
    await new Promise((r) => setImmediate(r));
    process.emit('SIGTERM', 'SIGTERM');
    expect(await code).toBe(0);

    const stuck = runMain(
      'p',
      (signal) =>
        new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            process.emit('SIGINT', 'SIGINT');
            resolve();
          });
        }),
      h.options,
    );
    await new Promise((r) => setImmediate(r));
    process.emit('SIGTERM', 'SIGTERM');
    await stuck;
    expect(h.exits).toEqual([1]);
    expect(h.out.join('')).toContain('SIGINT again');
  });
});
