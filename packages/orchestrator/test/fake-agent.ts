import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AgentInfo } from '@orch/protocol';

/**
 * A test double of a host agent that speaks the agent protocol's info endpoint (bearer token
 * required). Counts every request it receives, so tests can prove that nothing was dialled.
 */
export class FakeAgent {
  requests = 0;
  /** When set, every request is answered with a redirect to this URL. */
  redirectTo: string | undefined;
  private constructor(
    private readonly server: Server,
    readonly url: string,
    public token: string,
    public info: AgentInfo,
  ) {}

  static async start(token: string, info: Partial<AgentInfo> = {}): Promise<FakeAgent> {
    let agent!: FakeAgent;
    const server = createServer((req, res) => agent.handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    agent = new FakeAgent(server, `http://127.0.0.1:${port}`, token, {
      id: `agent-${port}`,
      kind: 'microvm',
      arch: 'amd64',
      version: 'test',
      accelerator: 'tcg',
      capacity: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      free: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      images: ['debian-12'],
      gpus: [],
      ...info,
    });
    return agent;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests++;
    if (this.redirectTo) {
      res.writeHead(302, { location: this.redirectTo }).end();
    } else if (req.headers.authorization !== `Bearer ${this.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
    } else if (req.url === '/v1/info') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.info));
    } else {
      res.writeHead(404).end();
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}
