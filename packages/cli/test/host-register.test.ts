import { expect } from 'vitest';
import { test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/**
 * `orch host register` checks what the orchestrator would refuse before it sends anything: the
 * agent URL with `checkAgentUrl` of `@orch/protocol` (link-local addresses included, in any
 * spelling), the id with the host id rule (`ids.test.ts`).
 */

test.for([
  'http://169.254.169.254',
  'http://2852039166:9090',
  'http://[::ffff:169.254.169.254]:9090',
  'http://[fe80::1]:9090',
])('a link-local agent URL is refused before anything is sent: %s', async (url, { orchd, config }) => {
  config.connectTo(orchd.url);
  const r = await runOrchAsync(['host', 'register', '--url', url], config.dir);
  expect(r.stderr).toMatch(
    /^orch: agent_url host \S+( \(\S+\))? is link-local \(.+\); agents are never dialled there\n$/,
  );
  expect(r.code).toBe(2);
  expect(orchd.requests).toEqual([]);
});

test('a good --id and a private agent address are sent as given', async ({ orchd, config }) => {
  config.connectTo(orchd.url);
  let body = '';
  orchd.answer((req, res) => {
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () =>
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { code: 'invalid_argument', message: 'stop here' } })),
    );
  });
  const r = await runOrchAsync(
    ['host', 'register', '--url', 'http://10.0.0.5:9090/', '--id', 'h.1'],
    config.dir,
  );
  expect([r.code, r.stderr]).toEqual([1, 'orch: stop here (invalid_argument)\n']);
  expect(JSON.parse(body)).toEqual({
    kind: 'microvm',
    agent_url: 'http://10.0.0.5:9090',
    labels: {},
    id: 'h.1',
  });
});
