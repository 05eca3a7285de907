import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * The body a product answers a malformed request with, in its own envelope; for example
 * orchd's `{ error: { code: 'invalid_argument', message } }` or the board's
 * `{ status: 'error', error: { _tag: 'InvalidInput', message } }`.
 */
export type ErrorEnvelope = (message: string, status: number) => unknown;

/** Handles an HTTP upgrade (WebSocket) request. */
export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * Why a request that Node's parser accepted still cannot be served, or `undefined` when it can.
 * Refused: a request target that is neither a path nor an absolute http(s) URL (`OPTIONS *`,
 * `CONNECT host:port`), a backslash in the path, a missing `Host` on HTTP/1.1, and a `Host` that
 * is not a host name or address with an optional port (`Host: a b`).
 */
export function requestRefusal(req: IncomingMessage): string | undefined {
  const target = req.url ?? '';
  if (target === '*') return `${req.method} * (the asterisk request target) is not served`;
  if (!target.startsWith('/')) {
    if (!/^https?:\/\//i.test(target)) return 'the request target must be a path starting with /';
    if (!URL.canParse(target)) return 'the request target is not a valid URL';
  }
  const query = target.indexOf('?');
  const backslash = target.indexOf('\\');
  if (backslash !== -1 && (query === -1 || backslash < query)) return 'backslash in the request path';
  const host = req.headers.host;
  if (host === undefined) {
    if (req.httpVersionMajor > 1 || (req.httpVersionMajor === 1 && req.httpVersionMinor >= 1)) {
      return 'the Host header is required';
    }
    return undefined;
  }
  if (!validHost(host)) return 'malformed Host header';
  return undefined;
}

/** A host name, IPv4 or bracketed IPv6 address, optionally with a port, that a URL keeps as written. */
function validHost(host: string): boolean {
  if (host === '' || /[\s/\\?#@]/.test(host)) return false;
  let url: URL;
  try {
    url = new URL(`http://${host}/`);
  } catch {
    return false;
  }
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
  return url.hostname !== '' && url.hostname === name.toLowerCase();
}

/** The status Node itself would answer a parser error with (see `clientError` in node:http). */
function clientErrorStatus(code: string | undefined): number {
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 413;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  return 400;
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Content Too Large',
  431: 'Request Header Fields Too Large',
};

/** Writes a complete JSON answer straight onto a socket and closes it (no ServerResponse there). */
function answerOnSocket(socket: Duplex, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Bad Request'}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
  );
}

/** Answers a refused request with the envelope and closes the connection. */
export function refuseRequest(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.req?.resume();
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    connection: 'close',
  });
  res.end(text);
}

/**
 * The `clientError` listener: requests Node's HTTP parser refuses (bad request line, bad header,
 * headers too large, timeouts) get the product's envelope instead of a bare 400 or a closed
 * socket. Nothing of the request is echoed.
 */
export function clientErrorHandler(envelope: ErrorEnvelope): (err: Error, socket: Duplex) => void {
  return (err, socket) => {
    const e = err as NodeJS.ErrnoException & { reason?: string };
    if (e.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = clientErrorStatus(e.code);
    const detail = typeof e.reason === 'string' && e.reason !== '' ? ` (${e.reason})` : '';
    answerOnSocket(
      socket,
      status,
      envelope(`malformed HTTP request: ${e.code ?? 'parse error'}${detail}`, status),
    );
  };
}

/**
 * An HTTP server whose every refusal speaks the product's envelope: parser refusals
 * (`clientError`), and requests the parser lets through but no handler can serve (see
 * {@link requestRefusal}), on plain requests and on upgrades alike. Node's own bare-400 answer to
 * a missing `Host` is turned off for that reason (`requireHostHeader: false`; the check is here).
 * @example
 * const server = createHttpServer(getRequestListener(app.fetch), {
 *   envelope: (message) => ({ error: { code: 'invalid_argument', message } }),
 * });
 * const port = await listen(server, config.port, config.host);
 */
export function createHttpServer(
  listener: RequestListener,
  options: { envelope: ErrorEnvelope; upgrade?: UpgradeListener },
): Server {
  const { envelope } = options;
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    const why = requestRefusal(req);
    if (why !== undefined) return refuseRequest(res, 400, envelope(why, 400));
    listener(req, res);
  });
  server.on('clientError', clientErrorHandler(envelope));
  const upgrade = options.upgrade;
  if (upgrade) {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const why = requestRefusal(req);
      if (why !== undefined) return answerOnSocket(socket, 400, envelope(why, 400));
      upgrade(req, socket, head);
    });
  }
  return server;
}

/** Starts listening; resolves with the bound port (useful with port 0), rejects on a listen error. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** The URL a server listening on `host:port` is reached at (IPv6 addresses bracketed). */
export function listenUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Stops a server: no new connections, idle ones closed now, the rest (streams, slow requests)
 * given `graceMs` to finish before they are cut.
 */
export function closeServer(server: Server, graceMs = 0): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
    if (graceMs <= 0) server.closeAllConnections();
    else setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
