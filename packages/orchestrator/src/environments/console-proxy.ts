import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { AGENT_ID, AGENT_ID_RULE, AGENT_VM_PATHS, OrchError, SESSION_COOKIE } from '@orch/protocol';
import { parse as parseCookies } from 'hono/utils/cookie';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';
import { rawErrorResponse, toOrchError } from '../api/errors.js';
import { type Authenticator, requireMaster } from '../auth/authenticator.js';
import type { CidrAllowlist } from '../auth/cidr-allowlist.js';
import {
  type ConnectionGuard,
  type CredentialEnded,
  type Hold,
  WS_CREDENTIAL_ENDED,
} from '../auth/connection-guard.js';
import { crossSiteRefusal } from '../auth/same-origin.js';
import { AgentCallError, requireDialable } from '../hosts/agent-client.js';
import type { HostService } from '../hosts/host-service.js';
import type { HostsRepo } from '../store/hosts-repo.js';
import type { EnvironmentService } from './environment-service.js';

const ATTACH_PATH = /^\/v1\/environments\/([^/]+)\/attach$/;

/**
 * `GET /v1/environments/{id}/attach` (master): the guest's serial console over WebSocket, proxied
 * to the agent's console WebSocket. Binary frames both ways carry console bytes. The same checks as
 * the API run before the upgrade (CIDR allowlist, the cross-site rule for session cookies, bearer
 * or session, master only, environment running); a refusal is an HTTP answer with the error
 * envelope, not an upgrade. An open console is held by the `ConnectionGuard`: when the browser
 * session that opened it is logged out (here or on another orchd) or expires, it is closed with
 * code 1008 and a reason saying so (`session ended: logged out`), and so is the agent side.
 */
export class ConsoleProxy {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });

  constructor(
    private readonly allowlist: CidrAllowlist,
    private readonly auth: Authenticator,
    private readonly envs: EnvironmentService,
    private readonly hostsRepo: HostsRepo,
    private readonly hosts: HostService,
    private readonly guard: ConnectionGuard,
    private readonly logger: Logger,
  ) {}

  /** Handles an HTTP upgrade; answers 404 `route_not_found` for anything but the attach route. */
  async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    let hold: Hold | undefined;
    try {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const m = ATTACH_PATH.exec(path);
      if (!m) throw new OrchError('route_not_found', `no WebSocket route for ${path.slice(0, 200)}`);
      if (!this.allowlist.allows(req.socket.remoteAddress)) {
        throw new OrchError('forbidden', "your address is not in the orchestrator's allowed client networks");
      }
      const sessionCookie = parseCookies(req.headers.cookie ?? '', SESSION_COOKIE)[SESSION_COOKIE];
      // The API's cross-site rule: a page on another origin must not drive the console with the
      // operator's session cookie (bearer tokens, as the CLI sends them, are not affected).
      const refusal = crossSiteRefusal({
        method: req.method ?? 'GET',
        url: `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}/`,
        header: (name) => headerValue(req, name),
        hasSessionCookie: sessionCookie !== undefined,
      });
      if (refusal) throw new OrchError('unauthorized', refusal, undefined, 403);
      const principal = await this.auth.authenticate({
        authorization: req.headers.authorization,
        sessionCookie,
      });
      requireMaster(principal);
      // Held from here (a logout while the agent is dialled refuses the upgrade), and released
      // when the connection's socket closes, whatever closed it.
      hold = this.guard.hold(principal);
      socket.once('close', hold.release);
      // The same id rule as the route table: checked before any lookup (and `%ff` is no id).
      const id = m[1]!;
      if (!AGENT_ID.test(id))
        throw new OrchError('not_found', `not found: id must be ${AGENT_ID_RULE}`, { field: 'id' });
      const env = await this.envs.row(id);
      if (env.state !== 'running')
        throw new OrchError('conflict', `environment ${env.id} is ${env.state}, not running`);
      const h = await this.hostsRepo.get(env.host_id);
      if (!h) throw OrchError.unavailable(`host ${env.host_id} is no longer registered`);
      requireDialable(h.host.agent_url);
      const upstream = await openUpstream(
        `${h.host.agent_url.replace(/^http/, 'ws')}${AGENT_VM_PATHS.console(env.id)}`,
        this.hosts.tokenFor(h),
      );
      const { signal } = hold;
      if (signal.aborted) {
        // The session ended while the agent was dialled: refused like the next upgrade would be.
        upstream.close();
        throw signal.reason;
      }
      this.wss.handleUpgrade(req, socket, head, (client) => {
        pipe(client, upstream);
        const end = () => {
          const ended = signal.reason as CredentialEnded;
          this.logger.info({ env: env.id, reason: ended.reason }, 'console closed: its credential ended');
          client.close(WS_CREDENTIAL_ENDED, ended.closeReason);
          upstream.close();
        };
        if (signal.aborted) end();
        else signal.addEventListener('abort', end, { once: true });
      });
      this.logger.info({ env: env.id }, 'console attached');
    } catch (err) {
      hold?.release();
      const error = toOrchError(err);
      if (error.code === 'internal') this.logger.error({ err }, 'console attach failed');
      socket.end(rawErrorResponse(error));
    }
  }

  close(): void {
    for (const c of this.wss.clients) c.terminate();
    this.wss.close();
  }
}

/** A request header as one string (the first, when a header was sent more than once). */
function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
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
      const status = res.statusCode ?? 0;
      const kind = status === 401 || status === 403 ? 'unauthorized' : 'bad_response';
      reject(
        new AgentCallError(
          kind,
          'unavailable',
          `the agent refused the console: http ${status}`,
          { agent_error: kind, agent_status: status },
          status,
        ),
      );
    });
    ws.once('error', (err) =>
      reject(
        new AgentCallError(
          'unreachable',
          'unavailable',
          `could not reach the agent console: ${err.message}`,
          {
            agent_error: 'unreachable',
          },
        ),
      ),
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
