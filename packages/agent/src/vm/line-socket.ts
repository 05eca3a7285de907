import { connect, type Socket } from 'node:net';
import { sleep } from '@support/server';

/** Connects to a Unix socket that QEMU serves, retrying until it exists or `deadline` passes. */
export async function connectUnix(path: string, deadline: number): Promise<Socket> {
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(path);
        s.once('connect', () => {
          s.off('error', reject);
          resolve(s);
        });
        s.once('error', reject);
      });
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(20);
    }
  }
}

/** Splits a socket's bytes into lines (without the newline) for `onLine`. */
export function onLines(socket: Socket, onLine: (line: string) => void): void {
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    pending += chunk;
    let i = pending.indexOf('\n');
    while (i >= 0) {
      onLine(pending.slice(0, i));
      pending = pending.slice(i + 1);
      i = pending.indexOf('\n');
    }
  });
}
