import { expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/**
 * Ids given on the command line are checked against the protocol's patterns before any URL is
 * built: `..` or `a/b` would otherwise be dot segments or extra segments that reach another route
 * (`orch env rm ..` went out as `DELETE /v1/`). The message names the argument; nothing is sent.
 */
const ORCH_ID = '(1-63 letters, digits, "_" or "-", starting with a letter or digit)';
const HOST_ID = '(1-63 letters, digits, ".", "_" or "-", starting with a letter or digit)';

test.for([
  [['env', 'rm', '..'], `<env> ".." is not an environment id ${ORCH_ID}`],
  [['env', 'get', '.'], `<env> "." is not an environment id ${ORCH_ID}`],
  [['env', 'pause', 'a/b'], `<env> "a/b" is not an environment id ${ORCH_ID}`],
  [['exec', '..', '--', 'true'], `<env> ".." is not an environment id ${ORCH_ID}`],
  [['logs', '%2e%2e'], `<env> "%2e%2e" is not an environment id ${ORCH_ID}`],
  [['attach', '..'], `<env> ".." is not an environment id ${ORCH_ID}`],
  [['snapshot', 'create', ''], `<env> "" is not an environment id ${ORCH_ID}`],
  [['snapshot', 'rm', '..'], `<snapshot> ".." is not a snapshot id ${ORCH_ID}`],
  [['snapshot', 'restore', '../x'], `<snapshot> "../x" is not a snapshot id ${ORCH_ID}`],
  [['host', 'cordon', '..'], `<id> ".." is not a host id ${HOST_ID}`],
  [['host', 'drain', '.'], `<id> "." is not a host id ${HOST_ID}`],
  [['apikeys', 'revoke', 'k\n1'], `<id> "k\\n1" is not an API key id ${ORCH_ID}`],
  // Not in a path, but checked with the same rule before the body is sent (`POST /v1/hosts`).
  [
    ['host', 'register', '--url', 'http://127.0.0.1:1', '--id', 'a b'],
    `--id "a b" is not a host id ${HOST_ID}`,
  ],
  [['host', 'register', '--url', 'http://127.0.0.1:1', '--id', ''], `--id "" is not a host id ${HOST_ID}`],
  [
    ['host', 'register', '--url', 'http://127.0.0.1:1', '--id', '.h'],
    `--id ".h" is not a host id ${HOST_ID}`,
  ],
] as const)('orch %j', async ([args, message], { orchd, config }) => {
  config.connectTo(orchd.url);
  const r = await runOrchAsync(args, config.dir);
  expect(r.stderr).toBe(`orch: ${message}\n`);
  expect(r.code).toBe(2);
  expect(orchd.requests).toEqual([]);
});

test('a good id goes out as one percent-encoded path segment', async ({ orchd, config }) => {
  config.connectTo(orchd.url);
  orchd.answer(json({ error: { code: 'not_found', message: 'host "h.1" not found' } }, 404));
  const r = await runOrchAsync(['host', 'cordon', 'h.1'], config.dir);
  expect([r.code, r.stderr]).toEqual([1, 'orch: host "h.1" not found (not_found)\n']);
  expect(orchd.requests).toEqual(['POST /v1/hosts/h.1?action=cordon']);
});
