import { createServer } from 'node:net';

/**
 * Free TCP ports on the bind address for QEMU's hostfwd. A port is found by binding to port 0 and
 * closing; ports handed out and not yet released are never handed out twice by this agent.
 */
export class HostPorts {
  private readonly inUse = new Set<number>();

  constructor(private readonly address: string) {}

  async allocate(): Promise<number> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await new Promise<number>((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(0, this.address, () => {
          const { port } = server.address() as { port: number };
          server.close(() => resolve(port));
        });
      });
      if (!this.inUse.has(port)) {
        this.inUse.add(port);
        return port;
      }
    }
    throw new Error('no free TCP port found');
  }

  release(ports: Iterable<number>): void {
    for (const p of ports) this.inUse.delete(p);
  }
}
