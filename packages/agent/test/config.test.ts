import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { malformedAnswers, runBin } from '@support/server/testing';
import { afterAll, expect, test } from 'vitest';
import { AGENT_BIN, AgentProcess } from './agent-process.js';

const run = (args: string[], env: Record<string, string>) => runBin(AGENT_BIN, args, env);
const REFUSAL = {
  status: 400,
  contentType: 'application/json',
  body: { error: { code: 'invalid_argument', message: expect.any(String) } },
};

test('orch-agent --help lists the commands and every flag and variable', () => {
  const r = run(['--help'], {});
  expect(r.status).toBe(0);
  for (const name of [
    'setup',
    'image',
    '--port',
    'AGENT_PORT',
    'MICROVM_AGENT_TOKEN',
    'GPU_AGENT_TOKEN',
    'AGENT_DATA_DIR',
    '--accel',
    '--host',
    'AGENT_HOST',
    '--boot-timeout-sec',
    'AGENT_BOOT_TIMEOUT_SEC',
    'AGENT_ISOLATION',
    'AGENT_VM_UIDS',
    'AGENT_EGRESS_INTERNET',
    'AGENT_EGRESS_ALLOW',
    'AGENT_EGRESS_DENY',
    'AGENT_STARTUP_LOG_MB',
  ]) {
    expect(r.stdout).toContain(name);
  }
  const imp = run(['image', 'import', '--help'], {});
  expect(imp.status).toBe(0);
  expect(imp.stdout).toContain('import [options] <name> <source>');
  expect(imp.stdout).toContain('--data-dir');
  expect(imp.stdout).toContain('oci-archive:PATH');
  const pull = run(['image', 'pull', '--help'], {});
  expect(pull.status).toBe(0);
  expect(pull.stdout).toContain('pull [options] <ref> [name]');
  for (const v of ['AGENT_REGISTRY_CREDENTIALS', 'AGENT_REGISTRY_TLS_VERIFY', 'AGENT_REGISTRY_CERT_DIR']) {
    expect(pull.stdout).toContain(v);
  }
  const setup = run(['setup', '--help'], {});
  expect(setup.stdout).toContain('AGENT_IMAGES');
  expect(setup.stdout).toContain('--images');
});

test('orch-agent refuses bad configuration, naming every problem, with exit status 2', () => {
  const r = run(['--boot-timeout-sec', '1'], { AGENT_PORT: 'abc', AGENT_ACCEL: 'fast' });
  expect(r.status).toBe(2);
  expect(r.stderr).toMatch(/^orch-agent: invalid configuration:\n/);
  expect(r.stderr).toContain('  - AGENT_PORT (--port): ');
  expect(r.stderr).toContain('  - AGENT_ACCEL (--accel <auto|kvm|tcg>): '.replace(' <auto|kvm|tcg>', ''));
  expect(r.stderr).toContain('  - AGENT_BOOT_TIMEOUT_SEC (--boot-timeout-sec): ');
  expect(r.stderr).toContain('a bearer token is required: set MICROVM_AGENT_TOKEN');
  const both = run([], { MICROVM_AGENT_TOKEN: 'a', GPU_AGENT_TOKEN: 'b' });
  expect(both.status).toBe(2);
  expect(both.stderr).toContain('set only one of MICROVM_AGENT_TOKEN and GPU_AGENT_TOKEN');
  const unknown = run(['frobnicate'], { MICROVM_AGENT_TOKEN: 'a' });
  expect(unknown.status).toBe(2);
  expect(unknown.stderr).toContain('unknown command "frobnicate"');
  const unknownFlag = run(['--listen', '0.0.0.0'], { MICROVM_AGENT_TOKEN: 'a' });
  expect(unknownFlag.status).toBe(2);
  expect(unknownFlag.stderr).toContain("unknown option '--listen'");
  // Subcommands follow the same rules.
  const setup = run(['setup', '--data-dir', ''], { AGENT_QEMU: '' });
  expect(setup.status).toBe(2);
  expect(setup.stderr).toContain('AGENT_DATA_DIR (--data-dir)');
  const egress = run([], {
    MICROVM_AGENT_TOKEN: 'a',
    AGENT_ISOLATION: 'maybe',
    AGENT_VM_UIDS: '5-2',
    AGENT_EGRESS_INTERNET: 'sometimes',
    AGENT_EGRESS_ALLOW: '10.1.0.0/16, 127.0.0.1, ::1',
    AGENT_EGRESS_DENY: '10.1.0.0/33,nope',
    AGENT_STARTUP_LOG_MB: '0',
  });
  expect(egress.status).toBe(2);
  for (const text of [
    'AGENT_ISOLATION (--isolation)',
    'AGENT_VM_UIDS (--vm-uids): must be FIRST-LAST uids',
    'AGENT_EGRESS_INTERNET (--egress-internet)',
    `"127.0.0.1" is this host's loopback`,
    `"::1" is this host's loopback`,
    '"10.1.0.0/33" is not a CIDR',
    '"nope" is not a CIDR',
    'AGENT_STARTUP_LOG_MB (--startup-log-mb)',
  ])
    expect(egress.stderr).toContain(text);
  expect(egress.stderr).not.toContain('"10.1.0.0/16"');
  const imp = run(['image', 'import', 'only-a-name'], {});
  expect(imp.status).toBe(2);
  expect(imp.stderr).toContain("missing required argument 'source'");
});

test('a failing command exits with status 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'orch-agent-import-'));
  try {
    const r = run(['image', 'import', 'x', join(dir, 'missing.tar')], { AGENT_DATA_DIR: dir });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^orch-agent: image import: /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('setup and image commands refuse unknown images, bad registry settings and bad references', () => {
  const images = run(['setup', '--data-dir', '/nonexistent'], { AGENT_IMAGES: 'busybox,centos' });
  expect(images.status).toBe(2);
  expect(images.stderr).toContain('AGENT_IMAGES (--images)');
  const empty = run(['setup'], { AGENT_IMAGES: ' , ' });
  expect(empty.status).toBe(2);
  expect(empty.stderr).toContain('name at least one image');
  const registry = run(['image', 'pull', 'h:5000/x:1'], {
    AGENT_REGISTRY_CREDENTIALS: 'no-colon-secret',
    AGENT_REGISTRY_TLS_VERIFY: 'maybe',
  });
  expect(registry.status).toBe(2);
  expect(registry.stderr).toContain('AGENT_REGISTRY_CREDENTIALS');
  expect(registry.stderr).toContain('AGENT_REGISTRY_TLS_VERIFY');
  expect(registry.stderr).not.toContain('no-colon-secret');
  const unknown = run(['image', 'export', 'x'], {});
  expect(unknown.status).toBe(2);
  expect(unknown.stderr).toContain("unknown command 'export'");
  const ref = run(['image', 'pull', 'no-registry-name', '--data-dir', dir], {});
  expect(ref.status).toBe(1);
  expect(ref.stderr).toContain('name the registry, as host[:port]/name[:tag]');
});

const dir = mkdtempSync(join(tmpdir(), 'orch-agent-noqemu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('without QEMU the agent starts, says so, and refuses to create a VM with a clear error', async () => {
  const agent = await AgentProcess.start({
    dataDir: dir,
    env: { AGENT_QEMU: '/nonexistent/qemu-system-x86_64' },
  });
  try {
    const info = await agent.request<{ accelerator: string; version: string }>('GET', '/v1/info');
    expect(info.body.accelerator).toBe('none');
    // The version, from package.json, in /v1/info and in the listening log line.
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(info.body.version).toBe(version);
    expect(agent.output.find((l) => l.includes('"msg":"orch-agent listening"'))).toContain(
      `"version":"${version}"`,
    );
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
    // Requests the HTTP parser refuses, or no route can serve, still get the envelope.
    for (const answer of Object.values(await malformedAnswers(agent.port))) {
      expect(answer).toEqual(REFUSAL);
    }
  } finally {
    await agent.stop();
  }
});

test('isolation on but its rules cannot be installed (no nft): /v1/info says why and creates are refused with 503', async () => {
  // A PATH with sh and setpriv but no nft; QEMU is a program that exists (nothing boots).
  const bin = mkdtempSync(join(tmpdir(), 'orch-agent-nonft-'));
  const data = mkdtempSync(join(tmpdir(), 'orch-agent-nonft-data-'));
  for (const tool of ['sh', 'setpriv', 'test']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    if (found) symlinkSync(found, join(bin, tool));
  }
  const agent = await AgentProcess.start({
    dataDir: data,
    env: { AGENT_QEMU: '/bin/true', PATH: bin, AGENT_VM_UIDS: '911000-911009' },
  });
  try {
    const info = await agent.request<{
      network_isolation: { mode: string; active: boolean; reason: string };
    }>('GET', '/v1/info');
    expect(info.body.network_isolation).toMatchObject({ mode: 'on', active: false });
    expect(info.body.network_isolation.reason).toMatch(/nft is not installed|not root/);
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
    expect(r.body.error.details.reason).toBe('isolation_unavailable');
    expect(r.body.error.message).toContain('AGENT_ISOLATION=off');
  } finally {
    await agent.stop();
    rmSync(bin, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
});

test('--version prints the version of its package.json, status 0', () => {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  for (const flag of ['--version', '-V']) {
    const r = run([flag], {});
    expect([r.status, r.stdout]).toEqual([0, `${version}\n`]);
  }
});
