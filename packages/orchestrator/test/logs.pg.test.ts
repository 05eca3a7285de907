import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Environment } from '@orch/protocol';
import { describeStores, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { ORCH_BIN, orchCli, REPO_ROOT } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * Environment logs (`GET /v1/environments/{id}/logs`, `orch logs`): windows, tail, follow until the
 * environment stops, refusals; against a test agent that serves the startup log as the real one
 * does (the QEMU stack test reads a real guest's log).
 */
describeStores('environment logs on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const config = mkdtempSync(join(tmpdir(), 'orch-logs-cli-'));
  const orch = (...args: string[]) => orchCli(config, ...args);
  const as = { token: MASTER };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const env = orchdStoreEnv(await openStore(store), await tempDir('orchd-data-'));
    orchd = await OrchdProcess.start({ ...env, ORCH_AUTH_TOKEN: MASTER, ORCH_RECONCILE_INTERVAL_SEC: '1' });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
    rmSync(config, { recursive: true, force: true });
  });

  const running = async (): Promise<Environment> => {
    const up = await orch('-o', 'json', 'up', 'examples/hello');
    expect(up.code, up.stderr).toBe(0);
    return JSON.parse(up.stdout) as Environment;
  };

  test('a window, the tail, an offset past the end, and orch logs print the startup log', async () => {
    const env = await running();
    const empty = await orchd.request('GET', `/v1/environments/${env.id}/logs`, as);
    expect(empty).toMatchObject({ status: 200, body: undefined });
    expect(empty.headers.get('x-log-size')).toBe('0');

    agent.appendLog(env.id, 'first line\nsecond line\n');
    const all = await orchd.request('GET', `/v1/environments/${env.id}/logs`, as);
    expect(all.body).toBe('first line\nsecond line\n');
    expect(all.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect([all.headers.get('x-log-offset'), all.headers.get('x-log-size')]).toEqual(['0', '23']);
    const tail = await orchd.request('GET', `/v1/environments/${env.id}/logs?tail=12`, as);
    expect(tail.body).toBe('second line\n');
    expect(tail.headers.get('x-log-offset')).toBe('11');
    const past = await orchd.request('GET', `/v1/environments/${env.id}/logs?offset=999`, as);
    expect([past.status, past.body, past.headers.get('x-log-offset')]).toEqual([200, undefined, '23']);

    expect(await orch('logs', env.id)).toEqual({ code: 0, stdout: 'first line\nsecond line\n', stderr: '' });
    expect((await orch('logs', env.id, '--tail', '12')).stdout).toBe('second line\n');
    // A log larger than one window (1 MiB) is printed whole, window by window.
    const big = `${'x'.repeat(1023)}\n`.repeat(1500);
    agent.appendLog(env.id, big);
    const printed = await orch('logs', env.id);
    expect(printed.stdout.length).toBe(23 + big.length);
    expect(printed.stdout.endsWith(big)).toBe(true);
  });

  test('follow streams new output as it is written and ends when the environment stops', async () => {
    const env = await running();
    agent.appendLog(env.id, 'booted\n');
    const follower = spawn(process.execPath, [ORCH_BIN, 'logs', env.id, '-f'], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: config, HOME: '/nonexistent' },
    });
    let out = '';
    follower.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => follower.on('exit', (code) => r(code)));
    await expect.poll(() => out, { timeout: 10_000 }).toBe('booted\n');
    agent.appendLog(env.id, 'step 1 done\n');
    await expect.poll(() => out, { timeout: 10_000 }).toBe('booted\nstep 1 done\n');
    // Stopping the environment ends the follow (the log goes with the VM; what the follower had
    // not read by then is gone with it, so the test lets it read first).
    agent.appendLog(env.id, 'last words\n');
    await expect.poll(() => out, { timeout: 10_000 }).toBe('booted\nstep 1 done\nlast words\n');
    const rm = await orch('-o', 'json', 'env', 'rm', env.id);
    expect(JSON.parse(rm.stdout).state).toBe('stopped');
    expect(await exited).toBe(0);
    expect(out).toBe('booted\nstep 1 done\nlast words\n');
  });

  test('follow over HTTP, and the refusals', async () => {
    const env = await running();
    agent.appendLog(env.id, 'abc');
    const ac = new AbortController();
    const res = await fetch(`${orchd.url}/v1/environments/${env.id}/logs?follow=true&offset=1`, {
      headers: { authorization: `Bearer ${MASTER}` },
      signal: ac.signal,
    });
    expect(res.headers.get('x-log-offset')).toBe('1');
    const reader = res.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('bc');
    agent.appendLog(env.id, 'def');
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('def');
    ac.abort();

    const bad = await orchd.request('GET', `/v1/environments/${env.id}/logs?offset=-1`, as);
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_argument' } } });
    const unknown = await orchd.request('GET', `/v1/environments/${env.id}/logs?lines=3`, as);
    expect(unknown).toMatchObject({ status: 400, body: { error: { code: 'invalid_argument' } } });
    const none = await orchd.request('GET', '/v1/environments/env_nope/logs', as);
    expect(none).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect((await orchd.request('GET', `/v1/environments/${env.id}/logs`)).status).toBe(401);

    await orch('env', 'rm', env.id);
    const gone = await orchd.request('GET', `/v1/environments/${env.id}/logs`, as);
    expect(gone).toMatchObject({
      status: 409,
      body: {
        error: { code: 'conflict', message: `environment ${env.id} is stopped: its log went with its VM` },
      },
    });
    const cli = await orch('logs', env.id);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('its log went with its VM (conflict)');
  });
});
