import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentInfo } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { AgentProcess, ASSETS, qemuAvailable, runSetup, vmRequest } from './agent-process.js';
import { agentCli, buildOciImage, ociToolsAvailable, TestRegistry } from './oci-fixtures.js';

const ready = qemuAvailable() && ociToolsAvailable();

interface ImageJson {
  name: string;
  source: string;
  digest: string;
  manifest_digest?: string;
  size_bytes: number;
  config?: { Env?: string[]; Entrypoint?: string[]; Cmd?: string[]; WorkingDir?: string; User?: string };
}

const imageJson = (dataDir: string, name: string): ImageJson =>
  JSON.parse(readFileSync(join(dataDir, 'images', name, 'image.json'), 'utf8'));

/** The entries of the images directory (an aborted import must leave none behind). */
const imageEntries = (dataDir: string): string[] =>
  existsSync(join(dataDir, 'images')) ? readdirSync(join(dataDir, 'images')).sort() : [];

describe.skipIf(!ready)('images: debian-12, OCI import, registry pull (real QEMU, TCG)', () => {
  let work: string;
  let dataDir: string;
  let agent: AgentProcess;
  let registry: TestRegistry;
  let oci: ReturnType<typeof buildOciImage>;
  let pushedDigest: string;

  beforeAll(async () => {
    dataDir = AgentProcess.makeDataDir(); // runs setup (busybox + debian-12) once
    work = mkdtempSync(join(tmpdir(), 'orch-images-test-'));
    oci = buildOciImage(work);
    registry = await TestRegistry.start(join(work, 'registry'));
    pushedDigest = registry.push(`oci:${oci.layout}:v2`, 'tools/ocibox:v2', work);
  }, 1_500_000);

  afterAll(async () => {
    await agent?.stop();
    registry?.stop();
    if (dataDir) AgentProcess.removeDataDir(dataDir);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('setup a second time is a no-op: it waits for a setup in progress, then every step says cached and the images are untouched', async () => {
    const file = join(ASSETS, 'images', 'debian-12', 'rootfs.img');
    const before = statSync(file).mtimeMs;
    // Another setup of the same directory holds its lock for a few seconds.
    const holder = spawn('flock', [join(ASSETS, '.setup.lock'), 'sh', '-c', 'echo held; sleep 5'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise((resolve) => holder.stdout.once('data', resolve));
    const started = Date.now();
    const out = runSetup();
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
    expect(out).toContain(`waiting for another orch-agent setup of ${ASSETS} to finish`);
    expect(out).toContain('kernel: cached');
    expect(out).toContain('image busybox: cached');
    expect(out).toContain('image debian-12: cached');
    expect(out).not.toMatch(/building/);
    expect(statSync(file).mtimeMs).toBe(before);
    const meta = imageJson(ASSETS, 'debian-12');
    expect(meta.source).toBe('mmdebstrap:bookworm');
    expect(meta.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
  }, 600_000);

  test('imports an OCI archive, an OCI layout tag and a docker-archive: layers, whiteouts, config, digest', () => {
    const noshell = agentCli([
      'image',
      'import',
      'noshell',
      `oci:${oci.layout}:noshell`,
      '--data-dir',
      dataDir,
    ]);
    expect(noshell.status, noshell.stderr).toBe(0);
    for (const [name, source] of [
      ['ocibox', `oci-archive:${oci.ociArchive}`],
      ['ocidir', `oci:${oci.layout}:v2`],
      ['dockbox', `docker-archive:${oci.dockerArchive}`],
    ] as const) {
      const r = agentCli(['image', 'import', name, source, '--data-dir', dataDir]);
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toContain(`image ${name}: ready`);
      const meta = imageJson(dataDir, name);
      const file = join(dataDir, 'images', name, 'rootfs.img');
      const sha = createHash('sha256').update(readFileSync(file)).digest('hex');
      expect(meta.digest).toBe(`sha256:${sha}`);
      expect(meta.source.startsWith(source.split(':')[0]!)).toBe(true);
      expect(meta.manifest_digest).toMatch(/^sha256:/);
      expect(meta.config).toEqual({
        Env: ['PATH=/custom/bin:/usr/bin:/bin', 'GREETING=oci'],
        Entrypoint: ['/bin/sh'],
        Cmd: ['-c', 'hello'],
        WorkingDir: '/etc',
        User: 'root',
      });
      // Layer 2's whiteout removed /etc/gone; both layers' other files are there; /orch was added.
      const etc = execFileSync('debugfs', ['-R', 'ls -l /etc', file], { encoding: 'utf8', stdio: 'pipe' });
      expect(etc).toContain('kept');
      expect(etc).toContain('added');
      expect(etc).not.toContain('gone');
      const orch = execFileSync('debugfs', ['-R', 'ls /orch', file], { encoding: 'utf8', stdio: 'pipe' });
      expect(orch).toContain('guest-agent');
    }
  }, 600_000);

  test('refused imports leave nothing behind: corrupt archive, missing tag, bad names, no space', () => {
    const corrupt = join(work, 'corrupt.tar');
    writeFileSync(
      corrupt,
      Buffer.concat([readFileSync(oci.ociArchive).subarray(0, 4096), Buffer.alloc(4096, 7)]),
    );
    const before = imageEntries(dataDir);
    const cases: [string, string, RegExp][] = [
      ['bad1', `oci-archive:${corrupt}`, /cannot read oci-archive:/],
      ['bad2', `oci:${oci.layout}:nope`, /not found/],
      ['bad3', `docker-archive:${join(work, 'missing.tar')}`, /no such file/],
      [
        'Upper',
        `oci-archive:${oci.ociArchive}`,
        /NAME: "Upper" is not a valid image name \(1-63 lower-case letters/,
      ],
      ['.hidden', `oci-archive:${oci.ociArchive}`, /is not a valid image name/],
      ['../up', `oci-archive:${oci.ociArchive}`, /is not a valid image name/],
    ];
    for (const [name, source, message] of cases) {
      const r = agentCli(['image', 'import', name, source, '--data-dir', dataDir]);
      expect(r.status, `${name} ${source}`).toBe(1);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
      expect(imageEntries(dataDir)).toEqual(before);
    }
    // No space: a data dir on a 6 MiB tmpfs.
    const small = join(work, 'small');
    execFileSync('sh', ['-c', `mkdir -p ${small} && mount -t tmpfs -o size=6m tmpfs ${small}`]);
    try {
      const r = agentCli(['image', 'import', 'ocibox', `oci-archive:${oci.ociArchive}`, '--data-dir', small]);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/space/);
      expect(imageEntries(small)).toEqual([]);
    } finally {
      execFileSync('umount', [small]);
    }
  }, 600_000);

  test('pulls from a registry with TLS verification and credentials that are never printed', () => {
    const ref = `${registry.host}/tools/ocibox:v2`;
    const env = { AGENT_REGISTRY_CREDENTIALS: `${registry.user}:${registry.password}` };
    // TLS verification is on by default: the registry's own CA is not trusted without the cert dir.
    const untrusted = agentCli(['image', 'pull', ref, '--data-dir', dataDir], env);
    expect(untrusted.status).toBe(1);
    expect(untrusted.stderr).toMatch(/certificate/);
    const certs = { ...env, AGENT_REGISTRY_CERT_DIR: registry.certDir };
    const wrong = agentCli(['image', 'pull', ref, '--data-dir', dataDir], {
      ...certs,
      AGENT_REGISTRY_CREDENTIALS: `${registry.user}:not-${registry.password}`,
    });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toMatch(/unauthorized|authentication/i);
    const ok = agentCli(['image', 'pull', ref, '--data-dir', dataDir], certs);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('image ocibox-v2: ready');
    const byDigest = agentCli(
      ['image', 'pull', `${registry.host}/tools/ocibox@${pushedDigest}`, 'pulled', '--data-dir', dataDir],
      certs,
    );
    expect(byDigest.status, byDigest.stderr).toBe(0);
    expect(imageJson(dataDir, 'pulled').manifest_digest).toBe(pushedDigest);
    expect(imageJson(dataDir, 'pulled').source).toBe(
      `docker://${registry.host}/tools/ocibox@${pushedDigest}`,
    );
    for (const r of [untrusted, wrong, ok, byDigest]) {
      expect(r.stdout + r.stderr).not.toContain(registry.password);
    }
    expect(imageEntries(dataDir).filter((e) => e.startsWith('.'))).toEqual([]);
  }, 600_000);

  test('boots debian-12, an imported and a pulled image; exec uses the image userland', async () => {
    agent = await AgentProcess.start({ dataDir });
    const info = await agent.request<AgentInfo>('GET', '/v1/info');
    for (const name of ['busybox', 'debian-12', 'ocibox', 'ocibox-v2']) {
      expect(info.body.images).toContain(name);
      const d = info.body.image_details.find((i) => i.name === name);
      expect(d?.digest, name).toMatch(/^sha256:/);
      expect(d?.size_bytes).toBeGreaterThan(0);
    }
    expect(info.body.image_details.find((i) => i.name === 'debian-12')?.source).toBe('mmdebstrap:bookworm');
    const startup = 'echo "shell=$(readlink -f /proc/$$/exe)"\n';
    for (const [id, image] of [
      ['deb', 'debian-12'],
      ['oci', 'ocibox'],
      ['pull', 'ocibox-v2'],
      ['bare', 'noshell'],
    ] as const) {
      const r = await agent.request('POST', '/v1/vms', vmRequest(id, { startup_script: startup }, { image }));
      expect(r.status, JSON.stringify(r.body)).toBe(202);
    }
    for (const id of ['deb', 'oci', 'pull', 'bare']) expect((await agent.waitVm(id)).state).toBe('running');

    const py = await agent.exec('deb', ['python3', '-c', 'print(6*7)']);
    expect(py).toMatchObject({ exit_code: 0, stdout: '42\n' });
    expect((await agent.exec('deb', ['apt-get', '--version'])).stdout).toMatch(/^apt \d/);
    expect((await agent.exec('deb', ['curl', '--version'])).stdout).toMatch(/^curl \d/);
    const tools = await agent.exec('deb', [
      'sh',
      '-c',
      'for t in ps ip less; do readlink -f "$(command -v $t)"; done; readlink -f /proc/$$/exe; cat /etc/resolv.conf',
    ]);
    expect(tools.stdout).toBe(
      '/usr/bin/ps\n/usr/bin/ip\n/usr/bin/less\n/usr/bin/dash\nnameserver 10.0.2.3\n',
    );
    expect((await agent.exec('deb', ['ps', '--version'])).stdout).toMatch(/procps-ng/);
    // The exec contract holds under dash too: env, cwd, stdin, 127 for a missing command.
    const ctx = await agent.exec('deb', ['sh', '-c', 'echo "$X $(pwd)"; cat'], {
      env: { X: "it's" },
      cwd: '/usr',
      stdin_base64: Buffer.from('in').toString('base64'),
    });
    expect(ctx).toMatchObject({ exit_code: 0, stdout: "it's /usr\nin" });
    expect((await agent.exec('deb', ['no-such-command'])).exit_code).toBe(127);
    // The console is the image's shell too.
    const ws = new WebSocket(`ws://127.0.0.1:${agent.port}/v1/vms/deb/console`, {
      headers: { authorization: `Bearer ${agent.token}` },
    });
    let seen = '';
    ws.on('message', (d: Buffer) => {
      seen += d.toString();
    });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    ws.send(Buffer.from('echo "con-$(readlink -f /proc/$$/exe)-$(( 6 * 7 ))"\n'));
    for (let i = 0; i < 300 && !seen.includes('-42'); i++) await new Promise((r) => setTimeout(r, 100));
    ws.close();
    expect(seen).toContain('con-/usr/bin/dash-42');
    await expect
      .poll(async () => (await agent.request('GET', '/v1/vms/deb/log')).body)
      .toMatch(/shell=\/usr\/bin\/dash/);

    for (const id of ['oci', 'pull']) {
      const r = await agent.exec(id, [
        'sh',
        '-c',
        'cat /etc/kept /etc/added; test -e /etc/gone || echo no-gone; hello',
      ]);
      expect(r, id).toMatchObject({ exit_code: 0, stdout: 'layer 1\nlayer 2\nno-gone\nhello from oci\n' });
      const path = await agent.exec(id, ['sh', '-c', 'echo "$PATH"']);
      expect(path.stdout.startsWith('/custom/bin:/usr/bin:/bin')).toBe(true);
    }
    for (const id of ['deb', 'oci', 'pull'])
      expect((await agent.request('DELETE', `/v1/vms/${id}`)).status).toBe(204);
  }, 900_000);
});
