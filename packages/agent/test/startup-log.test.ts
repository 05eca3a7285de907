/** The bounded startup log (startup-log.ts) against a socket that stands in for QEMU's log chardev. */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { StartupLog } from '../src/vm/startup-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A listening socket like QEMU's `log.sock`; `send` writes to the agent's connection. */
async function fakeChardev(dir: string) {
  const path = join(dir, 'log.sock');
  let peer: Socket | undefined;
  const connected = new Promise<Socket>((resolve) => {
    const server = createServer((s) => {
      peer = s;
      server.close();
      resolve(s);
    });
    server.listen(path);
  });
  return {
    path,
    connected,
    /** Writes `data` and resolves once the kernel took it (backpressure honoured). */
    send: (data: Buffer) =>
      new Promise<void>((resolve) => {
        if (peer!.write(data)) resolve();
        else peer!.once('drain', () => resolve());
      }),
    close: () => peer?.end(),
  };
}

const onDisk = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f === 'startup.log' || f === 'startup.log.1')
    .reduce((n, f) => n + statSync(join(dir, f)).size, 0);

async function settle(log: StartupLog, size: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await log.read({ tail: 0 })).size === size) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the log did not reach the expected size');
}

test('a flood keeps at most maxBytes on disk; offsets stay absolute and reads start at the oldest byte kept', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'startup-log-'));
  dirs.push(dir);
  const max = 64 * 1024;
  const log = new StartupLog(dir, max);
  const chardev = await fakeChardev(dir);
  await log.attach(chardev.path, Date.now() + 5000);
  await chardev.connected;
  // 2 MB of numbered lines: line i is "line <i padded to 8>\n", 14 bytes each.
  const line = (i: number) => `line ${String(i).padStart(8, '0')}\n`;
  const lines = 150_000;
  let peak = 0;
  for (let i = 0; i < lines; i += 1000) {
    const chunk = Array.from({ length: Math.min(1000, lines - i) }, (_, k) => line(i + k)).join('');
    await chardev.send(Buffer.from(chunk));
    peak = Math.max(peak, onDisk(dir));
  }
  const total = lines * 14;
  await settle(log, total);
  expect(peak).toBeLessThanOrEqual(max);
  expect(onDisk(dir)).toBeLessThanOrEqual(max);

  // The tail is the last lines, at their absolute offsets.
  const tail = await log.read({ tail: 28 });
  expect(tail.size).toBe(total);
  expect(tail.offset).toBe(total - 28);
  const last = lines - 1;
  expect(tail.bytes.toString()).toBe(line(last - 1) + line(last));

  // Asking from 0 (dropped long ago) starts at the oldest byte kept, which is a line start here.
  const oldest = await log.read({ offset: 0 });
  expect(oldest.offset).toBeGreaterThan(total - max - 1);
  expect(oldest.offset % 14).toBe(0);
  expect(oldest.bytes.subarray(0, 14).toString()).toBe(line(oldest.offset / 14));
  // A window spanning both segments reads continuously.
  const all = oldest.bytes;
  expect(all.length).toBe(total - oldest.offset);
  for (let at = 0; at < all.length; at += 14)
    expect(all.subarray(at, at + 14).toString()).toBe(line((oldest.offset + at) / 14));

  // Follow-style reads from the previous end get nothing new; a new line arrives at the next offset.
  const before = await log.read({ offset: total });
  expect(before.bytes.length).toBe(0);
  await chardev.send(Buffer.from('the end\n'));
  await settle(log, total + 8);
  const next = await log.read({ offset: total });
  expect(next.offset).toBe(total);
  expect(next.bytes.toString()).toBe('the end\n');

  // A fresh reader (the agent restarted) sees the same offsets from the files alone.
  const reread = await new StartupLog(dir, max).read({ offset: total });
  expect(reread).toEqual(next);

  // A live snapshot copies what is kept; a restore seeds at most half of the window from it.
  const copy = join(dir, 'copy.log');
  await log.copyTo(copy);
  expect(
    readFileSync(copy)
      .toString()
      .endsWith(`${line(last)}the end\n`),
  ).toBe(true);
  chardev.close();
  const restoredDir = mkdtempSync(join(tmpdir(), 'startup-log-restored-'));
  dirs.push(restoredDir);
  const restored = new StartupLog(restoredDir, max);
  await restored.seed(copy);
  const r = await restored.read({ tail: 8 });
  expect(r.bytes.toString()).toBe('the end\n');
  expect(onDisk(restoredDir)).toBeLessThanOrEqual(max / 2);
});

test('a VM without output has an empty log', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'startup-log-'));
  dirs.push(dir);
  expect(await new StartupLog(dir, 1024).read({})).toEqual({ bytes: Buffer.alloc(0), offset: 0, size: 0 });
  writeFileSync(join(dir, 'startup.log.base'), 'garbage');
  expect((await new StartupLog(dir, 1024).read({})).size).toBe(0);
});
