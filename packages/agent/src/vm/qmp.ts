import type { Socket } from 'node:net';
import { connectUnix, onLines } from './line-socket.js';

/** A QMP command that QEMU answered with an error. */
export class QmpError extends Error {
  override readonly name = 'QmpError';
}

/**
 * A minimal QMP client over QEMU's `-qmp unix:...` socket: capabilities negotiation, then
 * commands answered in order (QMP answers one command at a time per connection). Events are
 * passed to `onEvent`.
 */
export class Qmp {
  private readonly waiting: { resolve: (v: unknown) => void; reject: (e: Error) => void }[] = [];
  private closed = false;

  private constructor(
    private readonly socket: Socket,
    onEvent: (event: string) => void,
  ) {
    onLines(socket, (line) => {
      let msg: { return?: unknown; error?: { desc: string }; event?: string; QMP?: unknown };
      try {
        msg = JSON.parse(line);
      } catch {
        return;
      }
      if (msg.event) return onEvent(msg.event);
      if (msg.QMP) return;
      const w = this.waiting.shift();
      if (!w) return;
      if (msg.error) w.reject(new QmpError(msg.error.desc));
      else w.resolve(msg.return);
    });
    socket.on('close', () => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) w.reject(new QmpError('QMP connection closed (QEMU exited)'));
    });
    socket.on('error', () => undefined);
  }

  static async connect(
    path: string,
    deadline: number,
    onEvent: (event: string) => void = () => {},
  ): Promise<Qmp> {
    const socket = await connectUnix(path, deadline);
    const qmp = new Qmp(socket, onEvent);
    await qmp.execute('qmp_capabilities');
    return qmp;
  }

  /** Runs a command and resolves with its `return` value. */
  execute<T = unknown>(command: string, args?: Record<string, unknown>): Promise<T> {
    if (this.closed) return Promise.reject(new QmpError('QMP connection closed (QEMU exited)'));
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ resolve: resolve as (v: unknown) => void, reject });
      this.socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}) })}\n`);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}
