import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ORCH_BIN, runOrch } from './run-orch.js';

/**
 * Reading the definition file (src/definition-file.ts): only regular files, and never more than the
 * size limit allows, so that no path makes `orch compile` hang or hold the file in memory.
 */
const root = mkdtempSync(join(tmpdir(), 'orch-deffile-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const LIMIT = 1_048_576;
const TOO_LARGE = `definition file is larger than ${LIMIT} characters`;

function dir(name: string): string {
  const d = join(root, name);
  mkdirSync(d, { recursive: true });
  return d;
}

/** Runs `orch` with a deadline, so that a blocking read fails the test instead of hanging it. */
function runWithin(ms: number, args: readonly string[], cwd: string) {
  const r = spawnSync(process.execPath, [ORCH_BIN, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: ms,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** GNU time prints the peak resident set size (KiB) of the command on its own last stderr line. */
const hasGnuTime = spawnSync('/usr/bin/time', ['-q', '-f', '%M', 'true']).status === 0;

describe('only regular files are read', () => {
  test('a character device (-f /dev/zero) is refused at once', () => {
    const r = runWithin(20_000, ['compile', '-f', '/dev/zero'], root);
    expect(r.signal).toBe(null);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'orch: cannot read definition file /dev/zero: not a regular file (a character device)\n',
    );
  });

  test.skipIf(spawnSync('mkfifo', ['--version']).status !== 0)(
    'a named pipe given with -f is refused, not waited on',
    () => {
      const d = dir('fifo');
      expect(spawnSync('mkfifo', [join(d, 'orch.yaml')]).status).toBe(0);
      const r = runWithin(20_000, ['compile', '-f', 'fifo/orch.yaml'], root);
      expect(r.signal).toBe(null);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        'orch: cannot read definition file fifo/orch.yaml: not a regular file (a named pipe (FIFO))\n',
      );
    },
  );

  test('a symbolic link to a device is refused like the device', () => {
    const d = dir('link');
    spawnSync('ln', ['-s', '/dev/zero', join(d, 'orch.yaml')]);
    const r = runWithin(20_000, ['compile', '-f', 'link/orch.yaml'], root);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'orch: cannot read definition file link/orch.yaml: not a regular file (a character device)\n',
    );
  });
});

describe('the size limit holds without reading the whole file', () => {
  test.skipIf(!hasGnuTime)('a 700 MB sparse file: the size diagnostic, in bounded memory', () => {
    const d = dir('sparse');
    const path = join(d, 'orch.yaml');
    closeSync(openSync(path, 'w'));
    truncateSync(path, 700 * 1024 * 1024);
    const r = runOrch(['compile', '-f', 'sparse/orch.yaml'], root, ['/usr/bin/time', '-q', '-f', '%M']);
    const lines = r.stderr.trimEnd().split('\n');
    const peakKib = Number(lines.pop());
    expect(r.code).toBe(1);
    expect(lines).toEqual([`sparse/orch.yaml:1:1: ${TOO_LARGE}`]);
    // Node alone takes ~50 MB; the old reader held the whole file (~600 MB).
    expect(peakKib).toBeLessThan(200 * 1024);
  });

  test('one character over the limit, in multi-byte text, is refused; at the limit it compiles', () => {
    const d = dir('edge');
    const head = 'version: 1\n#';
    // "€" is 3 bytes of UTF-8 and one UTF-16 code unit; "😀" is 4 bytes and two code units.
    const atLimit = `${head}${'😀'.repeat((LIMIT - head.length - 2) / 2)}€\n`;
    expect(atLimit.length).toBe(LIMIT);
    writeFileSync(join(d, 'orch.yaml'), atLimit);
    expect(runOrch(['compile', '-f', 'edge/orch.yaml', '--only', 'spec'], root).code).toBe(0);
    writeFileSync(join(d, 'orch.yaml'), `${atLimit}x`);
    const r = runOrch(['compile', '-f', 'edge/orch.yaml'], root);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`edge/orch.yaml:1:1: ${TOO_LARGE}\n`);
  });

  test('a byte-order mark still reaches the parser, which skips it', () => {
    const d = dir('bom');
    writeFileSync(join(d, 'orch.yaml'), '\uFEFFversion: 2\n');
    const r = runOrch(['compile', '-f', 'bom/orch.yaml'], root);
    expect(r.stderr).toBe('bom/orch.yaml:1:10: version 2 is not supported: the only version is 1\n');
  });
});
