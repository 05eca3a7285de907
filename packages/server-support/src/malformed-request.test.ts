import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { closeServer, createHttpServer, listen } from './malformed-request.js';
import { MALFORMED_REQUESTS, rawHttp } from './testing.js';

const envelope = (message: string) => ({ error: { code: 'invalid_argument', message } });
const server = createHttpServer(
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
    res.end('ok');
  },
  { envelope, upgrade: (_req, socket) => socket.end('HTTP/1.1 101 Switching Protocols\r\n\r\n') },
);
let port = 0;
beforeAll(async () => {
  port = await listen(server, 0, '127.0.0.1');
});
afterAll(() => closeServer(server));

describe('malformed requests get the envelope', () => {
  test.each(Object.entries(MALFORMED_REQUESTS))('%s: 400 with the JSON envelope', async (_name, request) => {
    const a = await rawHttp(port, request);
    expect(a.status).toBe(400);
    expect(a.headers['content-type']).toBe('application/json');
    const body = JSON.parse(a.body) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_argument');
    expect(body.error.message.length).toBeGreaterThan(0);
  });

  test('headers over the limit: 431 in the envelope', async () => {
    const a = await rawHttp(port, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(a.status).toBe(431);
    expect(JSON.parse(a.body)).toMatchObject({ error: { code: 'invalid_argument' } });
  });

  test('an upgrade with a malformed Host is refused the same way', async () => {
    const a = await rawHttp(
      port,
      'GET /ws HTTP/1.1\r\nHost: a b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
    );
    expect(a.status).toBe(400);
    expect(JSON.parse(a.body)).toMatchObject({ error: { message: 'malformed Host header' } });
  });

  test('well-formed requests pass: a host with a port, IPv6, HTTP/1.0 without Host, absolute URLs', async () => {
    for (const request of [
      'GET /x HTTP/1.1\r\nHost: localhost:8080\r\nConnection: close\r\n\r\n',
      'GET /x HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n',
      'GET /x HTTP/1.0\r\n\r\n',
      'GET http://localhost/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
    ]) {
      const a = await rawHttp(port, request);
      expect(a.status, request).toBe(200);
      expect(a.body).toBe('ok');
    }
  });
});
