import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IN_CI, pgTest, TestPostgres } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { FakeAgent } from './fake-agent.js';
import { OrchdProcess } from './orchd-process.js';

const skip = !TestPostgres.available() && !IN_CI;

/** The `orch` CLI's control-plane commands against a real orchd (server store: master token and API keys). */
const ORCH = fileURLToPath(new URL('../../cli/bin/orch.js', import.meta.url));
const MASTER = 'cli-master-token';
const config = mkdtempSync(join(tmpdir(), 'orch-cli-config-'));
let orchd: OrchdProcess;
let agent: FakeAgent;

/** Runs the CLI without blocking this process (the fake agent answers from here). */
function orch(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [ORCH, ...args],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: config, HOME: '/nonexistent' },
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

pgTest.beforeAll(async ({ testPostgres }) => {
  orchd = await OrchdProcess.start({
    DATABASE_URL: await testPostgres.createDatabase('cli'),
    TOKEN_ENCRYPTION_KEY: '12'.repeat(32),
    ORCH_AUTH_TOKEN: MASTER,
  });
  agent = await FakeAgent.start('agent-secret');
});
afterAll(async () => {
  await orchd?.stop();
  await agent?.close();
  rmSync(config, { recursive: true, force: true });
});

describe.skipIf(skip)('orch connect, context, apikeys, host', () => {
  test('connect refuses a wrong token and saves nothing', async () => {
    const r = await orch('connect', orchd.url, '--token', 'wrong', '--master');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('orch: invalid token (unauthorized)\n');
    expect((await orch('context', 'list')).stdout).toContain('no contexts yet');
  });

  test('connect --master saves a 0600 context and makes it current', async () => {
    const r = await orch('connect', orchd.url, '--token', MASTER, '--master', '--name', 'local');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`connected to ${orchd.url} as context "local" (master token)\n`);
    const file = join(config, 'orch', 'config.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(config, 'orch')).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      current: 'local',
      contexts: { local: { url: orchd.url, master: true, token: MASTER } },
    });
    const list = await orch('context', 'list');
    expect(list.stdout).toMatch(
      /^CURRENT\s+NAME\s+URL\s+MASTER\n\*\s+local\s+http:\/\/127\.0\.0\.1:\d+\s+yes\n$/,
    );
    expect(list.stdout).not.toContain(MASTER);
  });

  test('apikeys create prints the secret once; list and revoke; -o json for scripts', async () => {
    const created = await orch('-o', 'json', 'apikeys', 'create', '--label', 'deploy bot');
    expect(created.code).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; secret: string; label: string };
    expect(key.secret).toMatch(/^orch_key_/);
    const human = await orch('apikeys', 'create', '--label', 'human');
    expect(human.stdout).toMatch(
      /^ID\s+LABEL\s+SECRET\nkey_\S+\s+human\s+orch_key_\S+\nSave the secret now: it is shown only once\.\n$/,
    );
    const list = await orch('apikeys', 'list');
    expect(list.stdout).toContain('deploy bot');
    expect(list.stdout).not.toContain(key.secret);
    expect((await orch('apikeys', 'revoke', key.id)).stdout).toBe(`revoked ${key.id}\n`);
    expect((await orch('apikeys', 'list')).stdout).not.toContain('deploy bot');
    const again = await orch('apikeys', 'revoke', key.id);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`orch: API key "${key.id}" not found (not_found)\n`);
  });

  test('host register, list, get, cordon, uncordon, rm', async () => {
    const reg = await orch(
      '-o',
      'json',
      'host',
      'register',
      '--url',
      agent.url,
      '--token',
      'agent-secret',
      '--id',
      'h1',
      '--label',
      'rack=a',
    );
    expect(reg.stderr).toBe('');
    expect(reg.code).toBe(0);
    expect(JSON.parse(reg.stdout)).toMatchObject({
      id: 'h1',
      kind: 'microvm',
      labels: { rack: 'a' },
      state: 'active',
    });
    expect(reg.stdout).not.toContain('agent-secret');
    expect((await orch('host', 'list')).stdout).toMatch(
      /^ID\s+KIND\s+ARCH\s+STATE\s+HEALTH\s+CPUS\s+RAM MB\s+DISK GB\s+URL\nh1\s+microvm\s+amd64\s+active\s+healthy\s+0\/8\s+0\/16384\s+0\/200\s+http:/,
    );
    // GET /v1/hosts/{id} and `orch host images` show the images the agent reported, with details.
    const got = JSON.parse((await orch('-o', 'json', 'host', 'get', 'h1')).stdout);
    expect(got.image_details).toEqual([
      { name: 'debian-12', size_bytes: 1 << 30, digest: null, source: 'mmdebstrap:bookworm', created_at: '' },
    ]);
    expect((await orch('host', 'images', 'h1')).stdout).toMatch(
      /^NAME\s+SIZE\s+DIGEST\s+SOURCE\ndebian-12\s+1024 MiB\s+-\s+mmdebstrap:bookworm\n$/,
    );
    expect((await orch('host', 'cordon', 'h1')).stdout).toContain('cordoned');
    expect(JSON.parse((await orch('-o', 'json', 'host', 'get', 'h1')).stdout).state).toBe('cordoned');
    expect((await orch('host', 'uncordon', 'h1')).stdout).toContain('active');
    expect((await orch('host', 'rm', 'h1')).stdout).toBe('removed h1\n');
    const gone = await orch('host', 'get', 'h1');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe('orch: host "h1" not found (not_found)\n');
  });

  test('a bad agent URL is refused by the CLI before anything is sent', async () => {
    const before = agent.requests;
    const r = await orch('host', 'register', '--url', `${agent.url}/?x=1`, '--token', 'agent-secret');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('orch: agent_url must not have a query string\n');
    expect(agent.requests).toBe(before);
  });

  test('an API-key context is refused on master-only commands with a clear message', async () => {
    const key = JSON.parse((await orch('-o', 'json', 'apikeys', 'create', '--label', 'limited')).stdout) as {
      secret: string;
    };
    expect((await orch('connect', orchd.url, '--token', key.secret, '--name', 'limited')).code).toBe(0);
    expect((await orch('host', 'list')).code).toBe(0);
    const r = await orch('apikeys', 'list');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'orch: this operation needs the master token; API keys are not accepted here (unauthorized)\n',
    );
    expect((await orch('context', 'use', 'local')).stdout).toBe('using context "local"\n');
    expect((await orch('context', 'use', 'nope')).code).toBe(2);
  });
});
