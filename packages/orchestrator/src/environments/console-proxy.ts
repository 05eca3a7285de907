import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { AGENT_VM_PATHS, ERROR_STATUS, SESSION_COOKIE } from '@orch/protocol';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';
import { ApiError } from '../api/errors.js';
import { type Authenticator, requireMaster } from '../auth/authenticator.js';
import type { CidrAllowlist } from '../auth/cidr-allowlist.js';
import { AgentError } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import type { EnvironmentService } from './environment-service.js';

const ATTACH_PATH = /^\/v1\/environments\/([^/]+)\/attach$/;

/**
 * `GET /v1/environments/{id}/attach` (master): the guest's serial console over WebSocket, proxied
 * to the agent's console WebSocket. Binary frames both ways carry console bytes. The same checks as
 * the API run before the upgrade (CIDR allowlist, bearer or session, master only, environment
 * running); a refusal is an HTTP answer with the error envelope, not an upgrade.
 */
export class ConsoleProxy {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });

  constructor(
    private readonly allowlist: CidrAllowlist,
    private readonly auth: Authenticator,
    private readonly envs: EnvironmentService,
    private readonly hostsRepo: HostsRepo,
    private readonly hosts: HostService,
    private readonly logger: Logger,
  ) {}

  /** Handles an HTTP upgrade; answers 404 `route_not_found` for anything but the attach route. */
  async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    try {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const m = ATTACH_PATH.exec(path);
      if (!m) throw new ApiError('route_not_found', `no WebSocket route for ${path}`);
      if (!this.allowlist.allows(req.socket.remoteAddress)) {
        throw new ApiError('forbidden', "your address is not in the orchestrator's allowed client networks");
      }
      const principal = await this.auth.authenticate({
        authorization: req.headers.authorization,
        sessionCookie: cookie(req, SESSION_COOKIE),
      });
      requireMaster(principal);
      const env = await this.envs.row(decodeURIComponent(m[1]!));
      if (env.state !== 'running')
        throw new ApiError('conflict', `environment ${env.id} is ${env.state}, not running`);
      const h = await this.hostsRepo.get(env.host_id);
      if (!h) throw ApiError.unavailable(`host ${env.host_id} is no longer registered`);
      const upstream = await openUpstream(
        `${h.host.agent_url.replace(/^http/, 'ws')}${AGENT_VM_PATHS.console(env.id)}`,
        this.hosts.tokenFor(h),
      );
      this.wss.handleUpgrade(req, socket, head, (client) => pipe(client, upstream));
      this.logger.info({ env: env.id }, 'console attached');
    } catch (err) {
      const apiError =
        err instanceof ApiError
          ? err
          : err instanceof AgentError
            ? ApiError.unavailable(err.message)
            : new ApiError('internal', 'internal error');
      const body = JSON.stringify(apiError.toBody());
      const status = apiError.status ?? ERROR_STATUS[apiError.code];
      const extra = Object.entries(apiError.headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.end(
        `HTTP/1.1 ${status} ${apiError.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\n\r\n${body}`,
      );
    }
  }

  close(): void {
    for (const c of this.wss.clients) c.terminate();
    this.wss.close();
  }
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return undefined;
}

function openUpstream(url: string, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}` },
      followRedirects: false,
      handshakeTimeout: 10_000,
    });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      reject(
        new AgentError(
          res.statusCode === 401 ? 'unauthorized' : 'bad_response',
          `the agent refused the console: http ${res.statusCode}`,
        ),
      );
    });
    ws.once('error', (err) =>
      reject(new AgentError('unreachable', `could not reach the agent console: ${err.message}`)),
    );
  });
}

/** Copies frames both ways; either side closing closes the other. */
function pipe(client: WebSocket, upstream: WebSocket): void {
  client.on(
    'message',
    (data, binary) => upstream.readyState === WebSocket.OPEN && upstream.send(data, { binary }),
  );
  upstream.on(
    'message',
    (data, binary) => client.readyState === WebSocket.OPEN && client.send(data, { binary }),
  );
  const closeBoth = () => {
    client.close();
    upstream.close();
  };
  client.on('close', closeBoth);
  upstream.on('close', closeBoth);
  client.on('error', closeBoth);
  upstream.on('error', closeBoth);
}
