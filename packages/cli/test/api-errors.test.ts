import { createServer, type Server } from 'node:http';
import { OrchError } from '@orch/protocol';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ApiCallError, OrchClient } from '../src/api-client.js';

/**
 * The CLI maps every error answer back to the protocol's typed error in one place
 * (`errorFromBody`): the server's code, status and details are kept, and an answer that is not the
 * envelope (a proxy's 502 page) still becomes a typed error.
 */
let server: Server;
let url: string;
const answers: Record<string, [number, string]> = {
  '/conflict': [
    409,
    JSON.stringify({
      error: { code: 'conflict', message: 'environment is stopped', details: { state: 'stopped' } },
    }),
  ],
  '/full': [
    503,
    JSON.stringify({
      error: { code: 'unavailable', message: 'disk full', details: { reason: 'disk_full' } },
    }),
  ],
  '/proxy': [502, '<html>Bad Gateway</html>'],
};
beforeAll(async () => {
  server = createServer((req, res) => {
    const [status, body] = answers[req.url ?? ''] ?? [200, '{"ok":true}'];
    res.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const failure = (path: string) =>
  new OrchClient({ url, master: true }).call('GET', path).then(
    () => {
      throw new Error('no error');
    },
    (err: unknown) => err as ApiCallError,
  );

test('error answers become typed errors with the server code, status and details', async () => {
  const conflict = await failure('/conflict');
  expect(conflict).toBeInstanceOf(ApiCallError);
  expect(conflict.error).toBeInstanceOf(OrchError);
  expect([conflict.code, conflict.status, conflict.details]).toEqual(['conflict', 409, { state: 'stopped' }]);
  expect(conflict.lines).toEqual(['orch: environment is stopped (conflict)']);
  expect((await failure('/full')).details).toEqual({ reason: 'disk_full' });
  const proxy = await failure('/proxy');
  expect([proxy.code, proxy.status]).toEqual(['internal', 502]);
  expect(proxy.lines[0]).toContain('http 502');
});

test('no answer at all is a transport error', async () => {
  const err = (await new OrchClient({ url: 'http://127.0.0.1:1', master: true })
    .call('GET', '/')
    .catch((e: unknown) => e)) as ApiCallError;
  expect(err.code).toBe('transport');
  expect(err.lines[0]).toMatch(/cannot reach the orchestrator/);
});
