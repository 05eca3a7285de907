import { existsSync, readFileSync } from 'node:fs';
import { describe, expect } from 'vitest';
import { json, test } from './fake-orchd.js';
import { runOrchAsync } from './run-orch.js';

/**
 * The contexts file and the tokens in it: a token that cannot travel in an HTTP header is refused
 * before anything is sent and never printed; a contexts file that does not hold is refused with
 * what is wrong in it and exit status 1, never used in part.
 */
const TOKEN = 's3cr3t-ma\nster-token-xyz';

describe('a token that is not visible ASCII', () => {
  test('orch connect refuses it before anything is sent, and does not echo it', async ({ orchd, config }) => {
    orchd.answer(json({ hosts: [] }));
    const r = await runOrchAsync(['connect', orchd.url, '--token', TOKEN, '--master'], config.dir);
    expect(r.stderr).toBe(
      'orch: --token must be visible ASCII (it is sent in an HTTP header); it was not sent or saved\n',
    );
    expect(r.code).toBe(2);
    expect(orchd.requests).toEqual([]);
    expect(existsSync(config.file)).toBe(false);
  });

  test.for(['tok en', 'tök', 'a\tb'])(
    'orch connect --token %j is refused too',
    async (token, { orchd, config }) => {
      const r = await runOrchAsync(['connect', orchd.url, '--token', token], config.dir);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^orch: --token must be visible ASCII/);
      expect(orchd.requests).toEqual([]);
    },
  );

  test('a contexts file holding one is refused, without the token', async ({ orchd, config }) => {
    config.write(
      JSON.stringify({ current: 'a', contexts: { a: { url: orchd.url, token: TOKEN, master: true } } }),
    );
    for (const args of [
      ['env', 'list'],
      ['context', 'list'],
    ]) {
      const r = await runOrchAsync(args, config.dir);
      expect(r.stderr).toBe(
        `orch: ${config.file} is not a valid contexts file (contexts.a.token: must be visible ASCII (it is sent in an HTTP header)); fix or remove it\n`,
      );
      expect(r.code).toBe(1);
      expect(r.stderr + r.stdout).not.toContain('ster-token');
    }
    expect(orchd.requests).toEqual([]);
  });

  test('a good token still connects, and is saved but never printed', async ({ orchd, config }) => {
    orchd.answer(json({ hosts: [] }));
    const r = await runOrchAsync(
      ['connect', orchd.url, '--token', 'orch_key_Abc-1.~', '--name', 'x'],
      config.dir,
    );
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(JSON.parse(readFileSync(config.file, 'utf8')).contexts.x.token).toBe('orch_key_Abc-1.~');
    const list = await runOrchAsync(['context', 'list'], config.dir);
    expect(list.stdout).not.toContain('orch_key_');
  });
});

describe('a malformed contexts file', () => {
  test.for([
    ['{"current":"a","contexts":null}', 'contexts: Invalid input: expected an object of contexts by name'],
    ['{"current":"a","contexts":{"a":null}}', 'contexts.a: Invalid input: expected object, received null'],
    ['{"contexts":{"a":5}}', 'contexts.a: Invalid input: expected object, received number'],
    ['{"contexts":{"a":"http://x"}}', 'contexts.a: Invalid input: expected object, received string'],
    [
      '{"contexts":{"a b":{"url":"ftp://x","master":"yes"}}}',
      'contexts["a b"].url: must be an http or https origin, for example http://127.0.0.1:8080; contexts["a b"].master: Invalid input: expected boolean, received string',
    ],
    ['{"current":5,"contexts":{}}', 'current: Invalid input: expected string, received number'],
    ['null', 'the top level: Invalid input: expected object, received null'],
    ['{"contexts":', 'not JSON'],
  ])('%s', async ([text, problem], { config }) => {
    config.write(text!);
    for (const args of [
      ['context', 'list'],
      ['env', 'list'],
    ]) {
      const r = await runOrchAsync(args, config.dir);
      expect(r.stderr, args.join(' ')).toBe(
        `orch: ${config.file} is not a valid contexts file (${problem}); fix or remove it\n`,
      );
      expect(r.code).toBe(1);
    }
  });

  test('a context named __proto__ is a context like any other', async ({ orchd, config }) => {
    config.write(
      JSON.stringify({
        current: '__proto__',
        contexts: JSON.parse(`{"__proto__":{"url":"${orchd.url}/","master":false}}`),
      }),
    );
    orchd.answer(json({ hosts: [] }));
    const r = await runOrchAsync(['host', 'list'], config.dir);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(orchd.requests).toEqual(['GET /v1/hosts']);
  });
});
