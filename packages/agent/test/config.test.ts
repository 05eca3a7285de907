import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { AGENT_BIN, AgentProcess } from './agent-process.js';

const run = (args: string[], env: Record<string, string>) =>
  spawnSync(process.execPath, [AGENT_BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });

test('orch-agent --help lists the commands and every flag and variable', () => {
  const r = run(['--help'], {});
  expect(r.status).toBe(0);
  for (const name of [
    'orch-agent setup',
    'orch-agent image import',
    '--port',
    'AGENT_PORT',
    'MICROVM_AGENT_TOKEN',
    'GPU_AGENT_TOKEN',
    'AGENT_DATA_DIR',
    '--accel',
    '--listen',
  ]) {
    expect(r.stdout).toContain(name);
  }
});

test('orch-agent refuses bad configuration, naming every problem, with exit status 2', () => {
  const r = run([], { AGENT_PORT: 'abc', AGENT_ACCEL: 'fast' });
  expect(r.status).toBe(2);
  expect(r.stderr).toContain('AGENT_PORT (--port)');
  expect(r.stderr).toContain('AGENT_ACCEL (--accel)');
  expect(r.stderr).toContain('a bearer token is required: set MICROVM_AGENT_TOKEN');
  const both = run([], { MICROVM_AGENT_TOKEN: 'a', GPU_AGENT_TOKEN: 'b' });
  expect(both.status).toBe(2);
  expect(both.stderr).toContain('set only one of MICROVM_AGENT_TOKEN and GPU_AGENT_TOKEN');
  expect(run(['frobnicate'], { MICROVM_AGENT_TOKEN: 'a' }).stderr).toContain('unknown command "frobnicate"');
});

const dir = mkdtempSync(join(tmpdir(), 'orch-agent-noqemu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('without QEMU the agent starts, says so, and refuses to create a VM with a clear error', async () => {
  const agent = await AgentProcess.start({
    dataDir: dir,
    env: { AGENT_QEMU: '/nonexistent/qemu-system-x86_64' },
  });
  try {
    const info = await agent.request<{ accelerator: string }>('GET', '/v1/info');
    expect(info.body.accelerator).toBe('none');
    const r = await agent.request<{ error: { code: string; message: string; details: { reason: string } } }>(
      'POST',
      '/v1/vms',
      {
        id: 'vm1',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 },
        manifest_inline: '',
        startup_script: '',
      },
    );
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('unavailable');
    expect(r.body.error.details.reason).toBe('missing_tool');
    expect(r.body.error.message).toContain('qemu-system-x86');
    const badSecret = await agent.request<{ error: { code: string; message: string } }>('POST', '/v1/vms', {
      id: 'vm2',
      spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 60 },
      manifest_inline: '',
      startup_script: '',
      secrets: { 'not-a-var': 'x' },
    });
    expect(badSecret.status).toBe(400);
    expect(badSecret.body.error.message).toContain('secret name "not-a-var"');
    expect(badSecret.body.error.message).not.toContain('"x"');
    const bad = await agent.request<{ error: { code: string } }>('POST', '/v1/vms', { id: 'x', nope: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_argument');
  } finally {
    await agent.stop();
  }
});
