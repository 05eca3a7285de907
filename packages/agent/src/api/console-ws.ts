import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { AgentError } from '../errors.js';
import type { VmManager } from '../vm/vm-manager.js';
import { checkId, toAgentError } from './app.js';
import type { BearerAuth } from './auth.js';

/**
 * `GET /v1/vms/{id}/console` with `Upgrade: websocket`: binary frames both ways carry the guest's
 * serial console (an interactive shell on ttyS0). Several clients may attach; all see the output.
 * The socket closes when the VM stops. Refusals are plain HTTP answers with the error envelope.
 */
export function consoleUpgradeHandler(auth: BearerAuth, vms: VmManager, logger: Logger) {
  const wss = new WebSocketServer({ noServer: true });
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    try {
      if (!auth.allows(req.headers.authorization))
        throw new AgentError('unauthorized', 'missing or invalid bearer token');
      const m = /^\/v1\/vms\/([^/?]+)\/console(\?.*)?$/.exec(req.url ?? '');
      if (!m) throw new AgentError('route_not_found', `no WebSocket route for ${req.url}`);
      const id = checkId(m[1]!);
      vms.get(id);
      wss.handleUpgrade(req, socket, head, (ws) => {
        let attached: ReturnType<VmManager['attachConsole']>;
        try {
          attached = vms.attachConsole(id, (data) => {
            if (data.length === 0) ws.close(1000, 'the VM stopped');
            else ws.send(data, { binary: true });
          });
        } catch (err) {
          ws.close(1011, toAgentError(err).message.slice(0, 120));
          return;
        }
        ws.on('message', (data: Buffer) =>
          attached.write(Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer)),
        );
        ws.on('close', () => attached.detach());
        ws.on('error', () => attached.detach());
      });
    } catch (err) {
      const e = toAgentError(err);
      if (e.code === 'internal') logger.error({ err }, 'console upgrade failed');
      const body = JSON.stringify(e.toBody());
      socket.end(
        `HTTP/1.1 ${e.status} ${e.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
  };
}
