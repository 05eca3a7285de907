import type { ServerResponse } from 'node:http';
import { describe, expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/**
 * `orch events` and `orch attach` read what the orchestrator sends outside the API client's
 * `call()` (a live stream, a refused WebSocket upgrade); they read error answers with the same
 * answer limit, and the event stream holds at most one 1 MiB line, so a server (or something posing
 * as one) that never ends a line or an answer cannot make the CLI grow without bound.
 */

const LIMIT_LINE =
  "orch: the orchestrator's answer is larger than 64 MiB; it was not read further (bad_answer)\n";

/** Writes `chunk` until `total` bytes went out or the client hung up, then ends the answer. */
function pump(res: ServerResponse, chunk: Buffer, total: number): void {
  let sent = 0;
  res.on('error', () => undefined);
  const more = () => {
    while (sent < total && !res.destroyed) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', more);
    }
    res.end();
  };
  more();
}

const sse = (res: ServerResponse) =>
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });

describe('orch events', () => {
  test('an error answer is read with the answer limit', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      pump(res, Buffer.alloc(2 ** 20, 0x20), 65 * 2 ** 20);
    });
    const r = await runOrchAsync(['events'], config.dir);
    expect([r.code, r.stderr, r.stdout]).toEqual([1, LIMIT_LINE, '']);
  });

  test('a line that never ends is cut off at 1 MiB: a transport error, no reconnect', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => {
      sse(res);
      res.write('data: ');
      // 64 MiB of one line, unless the CLI hangs up first.
      pump(res, Buffer.alloc(64 * 1024, 0x78), 64 * 2 ** 20);
    });
    const r = await runOrchAsync(['events'], config.dir);
    expect(r.stderr).toBe(
      "orch: the orchestrator's event stream sent a line longer than 1 MiB without a line break; stopped reading it (transport)\n",
    );
    expect(r.code).toBe(1);
    expect(orchd.requests).toEqual(['GET /v1/events']);
  });

  test('lines up to the limit are events like any other', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    const big = 'y'.repeat(2 ** 20 - 'data: ""'.length);
    orchd.answer((req, res) => {
      if (req.headers['last-event-id'] === '7') {
        json({ error: { code: 'unauthorized', message: 'the key was revoked' } }, 401)(req, res);
        return;
      }
      sse(res);
      res.end(`id: 7\nevent: host.updated\ndata: "${big}"\n\n`);
    });
    const r = await runOrchAsync(['events'], config.dir);
    expect(r.stdout).toBe(`${JSON.stringify({ id: 7, type: 'host.updated', data: big })}\n`);
    expect([r.code, r.stderr]).toEqual([1, 'orch: the key was revoked (unauthorized)\n']);
    // The dropped stream was resumed after the event printed (Last-Event-ID: 7), then refused.
    expect(orchd.requests).toEqual(['GET /v1/events', 'GET /v1/events']);
  });

  test('event data that is not JSON ends it as a malformed answer (not a reconnect loop)', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => {
      sse(res);
      res.end('id: 3\nevent: host.updated\ndata: {not json\n\n');
    });
    const r = await runOrchAsync(['events'], config.dir);
    expect(r.stderr).toBe(
      'orch: malformed event from the orchestrator: the data of event 3 is not JSON (bad_answer)\n',
    );
    expect(r.code).toBe(1);
    expect(orchd.requests).toEqual(['GET /v1/events']);
  });
});

describe('orch attach', () => {
  test('a refused upgrade is the error answer, in the envelope', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer(json({ error: { code: 'unauthorized', message: 'attach needs the master token' } }, 403));
    const r = await runOrchAsync(['attach', 'env_1'], config.dir);
    expect([r.code, r.stderr]).toEqual([1, 'orch: attach needs the master token (unauthorized)\n']);
    expect(orchd.requests).toEqual(['GET /v1/environments/env_1/attach']);
  });

  test('its error answer is read with the answer limit', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      pump(res, Buffer.alloc(2 ** 20, 0x20), 65 * 2 ** 20);
    });
    const r = await runOrchAsync(['attach', 'env_1'], config.dir);
    expect([r.code, r.stderr]).toEqual([1, LIMIT_LINE]);
  });
});
