import { createServer, type Server } from 'node:http';
import { OrchError } from '@orch/protocol';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { ApiCallError, OrchClient, transportProblem } from '../src/api-client.js';

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
  new OrchClient({ url, master: true }).call(z.unknown(), 'GET', path).then(
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
    .call(z.unknown(), 'GET', '/')
    .catch((e: unknown) => e)) as ApiCallError;
  expect(err.code).toBe('transport');
  expect(err.lines[0]).toMatch(/cannot reach the orchestrator/);
});

/**
 * An answer too slow to finish (headers, then a byte now and then) is the same transport error as
 * no answer at all, whichever part of it the time limit cuts; the limit is 30 s in the CLI, made
 * short here. (The entry point prints `lines` and exits with `exitCode`.)
 */
test('a slow-drip answer is the transport error of no answer', async () => {
  const slow = createServer((req, res) => {
    if (req.url === '/drip') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      const timer = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(timer));
    }
    // any other path: never answers at all
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  const at = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
  try {
    const api = new OrchClient({ url: at, master: true }, { timeoutMs: 300 });
    const fail = (path: string) =>
      api.call(z.unknown(), 'GET', path).then(
        () => {
          throw new Error('no error');
        },
        (e: unknown) => e as ApiCallError,
      );
    const [drip, silent] = await Promise.all([fail('/drip'), fail('/silent')]);
    const line = `orch: cannot reach the orchestrator at ${at}: no complete answer within 0.3 s (transport)`;
    for (const err of [drip, silent]) {
      expect(err).toBeInstanceOf(ApiCallError);
      expect([err.code, err.exitCode, err.lines]).toEqual(['transport', 1, [line]]);
    }
  } finally {
    slow.closeAllConnections();
    await new Promise<void>((r) => slow.close(() => r()));
  }
});

test('transport errors never quote fetch’s message (it can hold the Authorization header)', () => {
  const headerError = new TypeError('Headers.append: "Bearer s3cr3t\nx" is an invalid header value.');
  expect(transportProblem(headerError)).toBe('the request failed');
  const refused = Object.assign(new TypeError('fetch failed'), {
    cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9 Bearer s3cr3t'), {
      code: 'ECONNREFUSED',
    }),
  });
  expect(transportProblem(refused)).toBe('ECONNREFUSED');
});

test('the answer cap holds for any limit: one byte over is refused, the limit itself is read', async () => {
  const api = new OrchClient({ url, master: true }, { answerLimitBytes: 11 });
  expect(await api.call(z.object({ ok: z.boolean() }), 'GET', '/ok')).toEqual({ ok: true }); // 11 bytes
  const small = new OrchClient({ url, master: true }, { answerLimitBytes: 10 });
  const err = (await small.call(z.unknown(), 'GET', '/ok').catch((e: unknown) => e)) as ApiCallError;
  expect([err.code, err.lines]).toEqual([
    'bad_answer',
    ["orch: the orchestrator's answer is larger than 10 bytes; it was not read further (bad_answer)"],
  ]);
});
