import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { Qmp } from '../src/vm/qmp.js';
import { loadState, SavedStateError, saveState } from '../src/vm/saved-state.js';

const dir = mkdtempSync(join(tmpdir(), 'saved-state-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A QMP stand-in: `migrate unix:PATH` connects to PATH and writes `stream`, as QEMU would. */
function fakeQmp(stream: Buffer): Qmp {
  let done = false;
  return {
    execute: async (command: string, args?: { uri?: string }) => {
      if (command === 'migrate') {
        const socket = connect(args!.uri!.replace(/^unix:/, ''));
        socket.end(stream, () => {
          done = true;
        });
      }
      if (command === 'query-migrate') return { status: done ? 'completed' : 'active' };
      return {};
    },
  } as unknown as Qmp;
}

/** Receives what loadState streams into a `-incoming unix:` socket. */
async function receive(path: string): Promise<{ got: Promise<Buffer>; close: () => void }> {
  const server = createServer();
  const got = new Promise<Buffer>((resolve) => {
    server.once('connection', (s: Socket) => {
      const parts: Buffer[] = [];
      s.on('data', (b: Buffer) => parts.push(b));
      s.on('end', () => resolve(Buffer.concat(parts)));
    });
  });
  await new Promise<void>((r) => server.listen(path, r));
  return { got, close: () => server.close() };
}

test('the saved state is encrypted on disk and streams back decrypted with the same secret only', async () => {
  const secretInMemory = `guest-secret-${randomBytes(8).toString('hex')}`;
  const stream = Buffer.concat([randomBytes(300_000), Buffer.from(secretInMemory), Buffer.alloc(200_000)]);
  const file = join(dir, 'state.enc');
  const size = await saveState(
    fakeQmp(stream),
    'agent-token-1',
    file,
    join(dir, 'out.sock'),
    Date.now() + 10_000,
  );
  const onDisk = readFileSync(file);
  expect(size).toBe(onDisk.length);
  expect(onDisk.includes(secretInMemory)).toBe(false);
  expect(onDisk.includes(Buffer.alloc(1024))).toBe(false); // zero pages are not zero on disk

  const ok = await receive(join(dir, 'in1.sock'));
  await loadState('agent-token-1', file, join(dir, 'in1.sock'), Date.now() + 10_000);
  expect((await ok.got).equals(stream)).toBe(true);
  ok.close();

  const wrong = await receive(join(dir, 'in2.sock'));
  await expect(loadState('another-token', file, join(dir, 'in2.sock'), Date.now() + 10_000)).rejects.toThrow(
    SavedStateError,
  );
  wrong.close();

  const damaged = Buffer.from(onDisk);
  damaged[damaged.length - 100]! ^= 1;
  writeFileSync(join(dir, 'damaged.enc'), damaged);
  const bad = await receive(join(dir, 'in3.sock'));
  await expect(
    loadState('agent-token-1', join(dir, 'damaged.enc'), join(dir, 'in3.sock'), Date.now() + 10_000),
  ).rejects.toThrow(/cannot be decrypted/);
  bad.close();

  writeFileSync(join(dir, 'short.enc'), onDisk.subarray(0, 20));
  await expect(
    loadState('agent-token-1', join(dir, 'short.enc'), join(dir, 'in4.sock'), Date.now() + 1000),
  ).rejects.toThrow(/truncated/);
});
