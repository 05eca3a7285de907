import { Agent, request } from 'node:http';
import { healthSchema } from '@board/protocol';
import { Periodic } from '@support/server';
import { LatencyBalancer } from './balancer.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';

/**
 * One upstream node and its health.
 *
 * State machine (per node):
 *
 *     unknown ──probe ok──▶ up ◀──probe ok── down
 *        │                  │                 ▲
 *        └──probe fails─────┴─probe fails or──┘
 *                             transport error on a routed request (passive ejection)
 *
 * Only `up` nodes are given requests. `unknown` is the state before the first probe answers;
 * `run()` waits for one round of probes before the router listens. A node is re-admitted only by
 * a successful probe, never by a request.
 */
export type NodeState = 'unknown' | 'up' | 'down';

export interface UpstreamNode {
  url: string;
  host: string;
  port: number;
  /** The node id from its /health answer (the URL until the first answer). */
  id: string;
  state: NodeState;
}

/** The upstream nodes, their health probes and the latency-aware choice among the up ones. */
export class NodePool {
  readonly nodes: UpstreamNode[];
  /** Keep-alive connections to the nodes, shared by routed requests and probes. */
  readonly agent = new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 });
  private readonly balancer = new LatencyBalancer<UpstreamNode>();
  private rr = 0;
  private readonly life = new AbortController();
  private probing: Promise<void> | undefined;

  constructor(
    urls: string[],
    private readonly opts: {
      intervalMs: number;
      timeoutMs: number;
      balance: 'latency' | 'round-robin';
      log: Logger;
      metrics: Metrics;
    },
  ) {
    this.nodes = urls.map((url) => {
      const u = new URL(url);
      // An IPv6 literal's hostname keeps its brackets (`[::1]`); a socket wants the bare address.
      const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
      return { url, host, port: Number(u.port || 80), id: url, state: 'unknown' };
    });
    for (const n of this.nodes) this.opts.metrics.nodeUp.set({ node: n.url }, 0);
  }

  /** Probes every node once (resolves then), and keeps probing every `intervalMs` until {@link stop}. */
  async run(): Promise<void> {
    await this.probeAll();
    this.probing = new Periodic({
      name: 'health probe',
      intervalMs: this.opts.intervalMs,
      delayFirst: true,
      log: this.opts.log,
      tick: () => this.probeAll(),
    }).run(this.life.signal);
  }

  /** Stops probing and closes the connections to the nodes; resolves once the probe loop has ended. */
  async stop(): Promise<void> {
    this.life.abort();
    this.agent.destroy();
    await this.probing;
  }

  /**
   * An up node not in `exclude`, chosen by the latency-aware balancer (power of two choices over a
   * moving average of each node's latency, see `balancer.ts`), or with `balance: 'round-robin'`
   * the next one from a rotating offset; undefined when there is none.
   */
  pick(exclude: ReadonlySet<UpstreamNode>): UpstreamNode | undefined {
    if (this.opts.balance === 'latency') {
      return this.balancer.choose(this.nodes.filter((n) => n.state === 'up' && !exclude.has(n)));
    }
    const n = this.nodes.length;
    const start = this.rr++ % n;
    for (let i = 0; i < n; i++) {
      const node = this.nodes[(start + i) % n] as UpstreamNode;
      if (node.state === 'up' && !exclude.has(node)) return node;
    }
    return undefined;
  }

  /** An attempt was sent to `node` (counted as in flight until {@link finished}). */
  started(node: UpstreamNode): void {
    this.balancer.started(node);
  }

  /** An attempt on `node` ended after `ms`, whatever its outcome. */
  finished(node: UpstreamNode, ms: number): void {
    this.balancer.finished(node, ms);
  }

  /** Passive ejection: a routed request saw a transport failure on this node. */
  markDown(node: UpstreamNode, reason: string): void {
    this.setState(node, 'down', reason);
  }

  private setState(node: UpstreamNode, state: NodeState, reason: string): void {
    if (node.state === state) return;
    const from = node.state;
    node.state = state;
    this.opts.metrics.nodeUp.set({ node: node.url }, state === 'up' ? 1 : 0);
    const level = state === 'up' ? 'info' : 'warn';
    this.opts.log[level]({ node: node.url, nodeId: node.id, from, to: state, reason }, 'node state');
  }

  private async probeAll(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.probe(n)));
  }

  private probe(node: UpstreamNode): Promise<void> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (ok: boolean, reason: string, id?: string) => {
        if (done) return;
        done = true;
        if (ok && id) node.id = id;
        this.setState(node, ok ? 'up' : 'down', reason);
        resolve();
      };
      const req = request(
        { host: node.host, port: node.port, path: '/health', method: 'GET', agent: this.agent },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            body += c;
          });
          res.on('end', () => {
            let json: unknown;
            try {
              json = JSON.parse(body);
            } catch {
              finish(false, 'probe answer is not JSON');
              return;
            }
            const health = healthSchema.safeParse(json);
            if (res.statusCode === 200 && health.success && health.data.ok) {
              finish(true, 'probe ok', health.data.nodeId);
            } else finish(false, `probe answered ${res.statusCode}`);
          });
          res.on('error', (e) => finish(false, `probe: ${e.message}`));
        },
      );
      req.setTimeout(this.opts.timeoutMs, () => {
        req.destroy(new Error('probe timeout'));
      });
      req.on('error', (e) => finish(false, `probe: ${e.message}`));
      req.end();
    });
  }
}
