import type { ServerResponse } from 'node:http';
import { describe, expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/**
 * What `orch` does with answers it cannot use (a misbehaving orchd, a proxy in between): each is
 * one `orch: ... (bad_answer)` line and exit status 1, never a crash, a JS internal or a wrong
 * table with exit status 0.
 */

/** Streams `total` bytes of spaces, 1 MiB at a time, as fast as the client reads, until it hangs up. */
function stream(res: ServerResponse, total: number, headers: Record<string, string> = {}): void {
  const chunk = Buffer.alloc(2 ** 20, 0x20);
  let sent = 0;
  res.writeHead(200, { 'content-type': 'application/json', ...headers });
  const pump = () => {
    while (sent < total && !res.destroyed) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    res.end();
  };
  res.on('error', () => undefined);
  pump();
}

describe('an answer larger than 64 MiB is refused as it streams in', () => {
  const LIMIT_LINE =
    "orch: the orchestrator's answer is larger than 64 MiB; it was not read further (bad_answer)\n";

  // Every command reads its answer through the same call; a list (which crashed) and apikeys list
  // (which hung) stand for all of them.
  test.for([
    ['env', 'list'],
    ['apikeys', 'list'],
  ])('orch %s %s, streamed just past the cap', async (args, { orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => stream(res, 65 * 2 ** 20));
    const r = await runOrchAsync(args, config.dir);
    expect(r.stderr).toBe(LIMIT_LINE);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
  });

  test('a declared length past the cap is refused before any of the body is read', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => stream(res, 2 ** 20, { 'content-length': String(3 * 2 ** 30) }));
    const r = await runOrchAsync(['env', 'list'], config.dir);
    expect(r.stderr).toBe(LIMIT_LINE);
    expect(r.code).toBe(1);
  });

  test('an error answer is capped too', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer((_req, res) => {
      res.statusCode = 500;
      stream(res, 65 * 2 ** 20);
    });
    const r = await runOrchAsync(['host', 'list'], config.dir);
    expect(r.stderr).toBe(LIMIT_LINE);
    expect(r.code).toBe(1);
  });
});

describe('an answer that is not the route’s schema is a malformed answer', () => {
  const malformed = (url: string, route: string, problem: string) =>
    `orch: malformed answer from the orchestrator at ${url} to ${route}: ${problem} (bad_answer)\n`;

  test.for([
    [
      ['env', 'list'],
      { environments: 'nope' },
      'GET /v1/environments',
      'environments: Invalid input: expected array, received string',
    ],
    [
      ['host', 'list'],
      { hosts: 5 },
      'GET /v1/hosts',
      'hosts: Invalid input: expected array, received number',
    ],
    [
      ['apikeys', 'list'],
      { api_keys: null },
      'GET /v1/api-keys',
      'api_keys: Invalid input: expected array, received null',
    ],
    [
      ['snapshot', 'list'],
      [],
      'GET /v1/snapshots',
      'the top level: Invalid input: expected object, received array',
    ],
  ] as const)('orch %j answered %j', async ([args, body, route, problem], { orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer(json(body));
    const r = await runOrchAsync(args, config.dir);
    expect(r.stderr).toBe(malformed(orchd.url, route, problem));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
  });

  test('orch env get with an empty object prints nothing and names the missing fields', async ({
    orchd,
    config,
  }) => {
    config.connectTo(orchd.url);
    orchd.answer(json({}));
    const r = await runOrchAsync(['env', 'get', 'env_abc'], config.dir);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      malformed(
        orchd.url,
        'GET /v1/environments/env_abc',
        'id: Invalid input: expected string, received undefined; task_id: Invalid input: expected string, received undefined; state: Invalid option: expected one of "creating"|"running"|"pausing"|"paused"|"resuming"|"stopping"|"stopped"|"error"; and 14 more',
      ),
    );
    expect(r.code).toBe(1);
  });

  test('an answer that is not JSON, and a body where none is expected', async ({ orchd, config }) => {
    config.connectTo(orchd.url);
    orchd.answer(json('<html>hello</html>'));
    const notJson = await runOrchAsync(['host', 'get', 'h1'], config.dir);
    expect(notJson.stderr).toBe(malformed(orchd.url, 'GET /v1/hosts/h1', 'not JSON'));
    expect(notJson.code).toBe(1);
    orchd.answer(json({ removed: true }));
    const body = await runOrchAsync(['host', 'rm', 'h1'], config.dir);
    expect(body.stderr).toBe(
      malformed(
        orchd.url,
        'DELETE /v1/hosts/h1',
        'the top level: Invalid input: expected undefined, received object',
      ),
    );
    expect(body.code).toBe(1);
    orchd.answer((_req, res) => res.writeHead(204).end());
    const ok = await runOrchAsync(['host', 'rm', 'h1'], config.dir);
    expect([ok.code, ok.stdout, ok.stderr]).toEqual([0, 'removed h1\n', '']);
  });
});
