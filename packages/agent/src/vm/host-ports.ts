import { createServer } from 'node:net';

/**
 * Free TCP ports on the bind address for QEMU's hostfwd. A port is found by binding to port 0 and
 * closing; ports handed out and not yet released are never handed out twice by this agent.
 */
export class HostPorts {
  private readonly inUse = new Set<number>();

  constructor(private readonly address: string) {}

  /**
   * A free port: `preferred` when it is free (a resumed VM keeps its port when it can), else any.
   */
  async allocate(preferred?: number): Promise<number> {
    if (preferred !== undefined && !this.inUse.has(preferred)) {
      const free = await this.probe(preferred).then(
        () => true,
        () => false,
      );
      if (free) {
        this.inUse.add(preferred);
        return preferred;
      }
    }
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await this.probe(0);
      if (!this.inUse.has(port)) {
        this.inUse.add(port);
        return port;
      }
    }
    throw new Error('no free TCP port found');
  }

  /** Marks ports held by a QEMU adopted from a previous agent run as in use. */
  claim(ports: Iterable<number>): void {
    for (const p of ports) this.inUse.add(p);
  }

  private probe(port: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(port, this.address, () => {
        const { port: bound } = server.address() as { port: number };
        server.close(() => resolve(bound));
      });
    });
  }

  release(ports: Iterable<number>): void {
    for (const p of ports) this.inUse.delete(p);
  }
}
