import type { ServerResponse } from 'node:http';

/**
 * Ends a long-lived streamed response the server chose to end (a cut-off, an expired token, a
 * stopping upstream) and its connection with it. The last chunk is followed at once by the
 * connection's end: a client that put a keep-alive connection back in its pool after a stream
 * would otherwise send its next request on a socket the server's keep-alive timer may close
 * first ('other side closed'), which is likely after a long drain. The body stays chunked, so a
 * client still tells this clean end from a server that died mid-stream (no last chunk).
 * What is queued and not read within `graceMs` (a client that stopped reading) is dropped with the
 * connection.
 *
 * @example
 * endStream(res, 5_000); // after writing the stream's last event
 */
export function endStream(res: ServerResponse, graceMs: number): void {
  if (res.destroyed || res.writableEnded) return;
  // Taken now: Node detaches the socket from the response when it finishes.
  const socket = res.socket;
  res.once('finish', () => socket?.end());
  res.end();
  if (res.writableLength === 0) return;
  const timer = setTimeout(() => res.destroy(), graceMs);
  timer.unref();
  res.once('close', () => clearTimeout(timer));
}
