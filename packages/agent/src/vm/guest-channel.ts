import type { Socket } from 'node:net';
import { connectUnix, onLines } from './line-socket.js';

/** The guest agent did not answer (the VM stopped, or the channel closed). */
export class GuestChannelError extends Error {
  override readonly name = 'GuestChannelError';
}

/** What an exec answered, decoded. */
export interface GuestExecResult {
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
}

const enc = (data: string | Buffer) => {
  const b = typeof data === 'string' ? Buffer.from(data) : data;
  return b.length === 0 ? '-' : b.toString('base64');
};
const dec = (s: string | undefined) =>
  s === undefined || s === '-' ? Buffer.alloc(0) : Buffer.from(s, 'base64');

/**
 * The host end of the guest agent's line protocol on the virtio-serial port `agent0` (see
 * images/guest-scripts.ts for the grammar). Requests carry an id; answers are matched by id, so
 * several execs run at once.
 */
export class GuestChannel {
  private readonly pending = new Map<
    string,
    { resolve: (fields: string[]) => void; reject: (e: Error) => void }
  >();
  private next = 0;
  private closed = false;
  private hello: { uptime: number } | undefined;
  private onHello: (() => void) | undefined;

  private constructor(private readonly socket: Socket) {
    onLines(socket, (line) => {
      const fields = line.split(' ');
      if (fields[0] === 'H') {
        this.hello = { uptime: Number(fields[2]) };
        this.onHello?.();
        return;
      }
      const id = fields[1];
      if (id === undefined) return;
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      p.resolve(fields);
    });
    socket.on('close', () => {
      this.closed = true;
      for (const p of this.pending.values())
        p.reject(new GuestChannelError('the guest channel closed (the VM stopped)'));
      this.pending.clear();
    });
    socket.on('error', () => undefined);
  }

  static async connect(path: string, deadline: number): Promise<GuestChannel> {
    return new GuestChannel(await connectUnix(path, deadline));
  }

  private request(fields: string[], timeoutMs: number): Promise<string[]> {
    if (this.closed)
      return Promise.reject(new GuestChannelError('the guest channel is closed (the VM stopped)'));
    const id = `${Date.now().toString(36)}${(this.next++).toString(36)}`;
    return new Promise<string[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new GuestChannelError(`the guest agent did not answer within ${Math.round(timeoutMs / 1000)} s`),
        );
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.write(`${[fields[0]!, id, ...fields.slice(1)].join(' ')}\n`);
    });
  }

  /**
   * Waits for the guest agent's hello (sent when it opens its port after a cold boot); nothing is
   * written to the port before it, since bytes sent to a port the guest has not opened can stay
   * stuck in QEMU. Resolves with the guest's uptime in seconds.
   */
  async waitHello(deadline: number, isAlive: () => boolean): Promise<number> {
    while (!this.hello) {
      if (!isAlive() || this.closed) throw new GuestChannelError('QEMU exited before the guest came up');
      if (Date.now() > deadline) throw new GuestChannelError('the guest agent did not come up in time');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.onHello = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.hello.uptime;
  }

  /**
   * Pings until the guest agent answers or `deadline` passes: after a live restore the agent has
   * its port open already and sends no hello. Resolves with the guest's uptime in seconds.
   */
  async waitReady(deadline: number, isAlive: () => boolean): Promise<number> {
    for (;;) {
      if (!isAlive()) throw new GuestChannelError('QEMU exited before the guest came up');
      const left = deadline - Date.now();
      if (left <= 0) throw new GuestChannelError('the guest agent did not come up in time');
      try {
        const f = await this.request(['p'], Math.min(2000, left));
        return Number(f[2]);
      } catch (err) {
        if (this.closed) throw err;
      }
    }
  }

  /** Runs a shell script (built by the caller with quoted argv) in the guest. */
  async exec(script: string, stdin: Buffer, timeoutS: number, limit: number): Promise<GuestExecResult> {
    const f = await this.request(
      ['x', String(timeoutS), String(limit), enc(script), enc(stdin)],
      (timeoutS + 60) * 1000,
    );
    const code = f[2];
    return {
      exitCode: code === '-' || code === undefined ? null : Number(code),
      timedOut: f[3] === '1',
      stdout: dec(f[4]),
      stderr: dec(f[5]),
      stdoutBytes: Number(f[6] ?? 0),
      stderrBytes: Number(f[7] ?? 0),
    };
  }

  /**
   * Starts the services (`services`: lines of services.ts, secrets inside) and then the startup
   * script with `envScript` (export lines) sourced first and then deleted in the guest.
   */
  async startup(script: string, envScript: string, manifestJson: string, services = ''): Promise<void> {
    await this.request(['s', enc(script), enc(envScript), enc(manifestJson), enc(services)], 30_000);
  }

  /** Sets the guest's clock (after a live restore the guest's wall clock lags). */
  async setTime(epochSeconds: number): Promise<void> {
    await this.request(['t', String(Math.floor(epochSeconds))], 10_000);
  }

  close(): void {
    this.socket.destroy();
  }
}
