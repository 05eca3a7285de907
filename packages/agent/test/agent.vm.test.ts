import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { AgentInfo, AgentVm, SnapshotArtifact } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import {
  AGENT_BIN,
  AgentProcess,
  buildServiceImage,
  filesContaining,
  importImage,
  qemuAvailable,
  qemuPids,
  vmRequest,
} from './agent-process.js';

const hasQemu = qemuAvailable();

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

describe.skipIf(!hasQemu)('orch-agent with real QEMU microVMs (TCG)', () => {
  let dataDir: string;
  let agent: AgentProcess;

  beforeAll(async () => {
    dataDir = AgentProcess.makeDataDir();
    // A service image (static busybox httpd, built offline) for the secrets test's service.
    const work = mkdtempSync(join(tmpdir(), 'orch-agent-svc-image-'));
    importImage(dataDir, 'websvc', `oci-archive:${buildServiceImage(work)}`);
    rmSync(work, { recursive: true, force: true });
    agent = await AgentProcess.start({ dataDir });
  }, 600_000);

  afterAll(async () => {
    await agent?.stop();
    if (dataDir) AgentProcess.removeDataDir(dataDir);
  });

  test('every request needs the bearer token: wrong or missing is 401, never a redirect', async () => {
    for (const token of ['wrong', '']) {
      for (const [method, path] of [
        ['GET', '/v1/info'],
        ['GET', '/v1/vms'],
        ['POST', '/v1/vms'],
        ['GET', '/v1/nope'],
      ] as const) {
        const r = await agent.request<{ error: { code: string } }>(
          method,
          path,
          method === 'POST' ? {} : undefined,
          token,
        );
        expect(r.status, `${method} ${path}`).toBe(401);
        expect(r.body.error.code).toBe('unauthorized');
      }
    }
    const ok = await agent.request<AgentInfo>('GET', '/v1/info');
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      kind: 'microvm',
      arch: 'amd64',
      accelerator: 'tcg',
      // busybox and debian-12 from setup; websvc imported by this file for the service test.
      images: ['busybox', 'debian-12', 'websvc'],
    });
  });

  test('an unknown image is a clear error at create time', async () => {
    const r = await agent.request<{ error: { code: string; message: string } }>(
      'POST',
      '/v1/vms',
      vmRequest('vm-badimage', {}, { image: 'no-such-image' }),
    );
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_argument');
    expect(r.body.error.message).toContain('unknown image "no-such-image"');
    expect(r.body.error.message).toContain('busybox');
  });

  test('cpus, RAM and disk of the spec are what the guest sees; exec returns exit codes and output', async () => {
    const created = await agent.request<AgentVm>(
      'POST',
      '/v1/vms',
      vmRequest('vm-spec', {}, { cpus: 2, ram_mb: 384, storage_gb: 3 }),
    );
    expect(created.status).toBe(202);
    expect(created.body.state).toBe('creating');
    const vm = await agent.waitVm('vm-spec');
    expect(vm.state).toBe('running');

    expect((await agent.exec('vm-spec', ['nproc'])).stdout.trim()).toBe('2');
    const memKb = Number(
      /MemTotal:\s+(\d+)/.exec((await agent.exec('vm-spec', ['cat', '/proc/meminfo'])).stdout)![1],
    );
    expect(memKb).toBeGreaterThan(300 * 1024);
    expect(memKb).toBeLessThanOrEqual(384 * 1024);
    const df = (await agent.exec('vm-spec', ['df', '-k', '/'])).stdout.trim().split('\n')[1]!.split(/\s+/);
    const diskKb = Number(df[1]);
    expect(diskKb).toBeGreaterThan(2.7 * 2 ** 20);
    expect(diskKb).toBeLessThanOrEqual(3 * 2 ** 20);

    const r = await agent.exec('vm-spec', ['sh', '-c', 'echo out; echo err >&2; exit 7']);
    expect(r).toMatchObject({
      exit_code: 7,
      stdout: 'out\n',
      stderr: 'err\n',
      timed_out: false,
      truncated: false,
    });
    // No shell between argv and the program: quotes, spaces and $ arrive verbatim.
    expect((await agent.exec('vm-spec', ['printf', '%s|', "it's", 'a b', '$HOME'])).stdout).toBe(
      "it's|a b|$HOME|",
    );
    const withEnv = await agent.exec('vm-spec', ['sh', '-c', 'echo "$GREETING from $(pwd)"; cat'], {
      env: { GREETING: 'hi there' },
      cwd: '/etc',
      stdin_base64: Buffer.from('from stdin').toString('base64'),
    });
    expect(withEnv.stdout).toBe('hi there from /etc\nfrom stdin');
    expect((await agent.exec('vm-spec', ['no-such-command'])).exit_code).toBe(127);
    // Large output arrives whole.
    const big = await agent.exec('vm-spec', ['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" x']);
    expect(big.stdout.length).toBe(3_000_000);
    expect(big.truncated).toBe(false);
  });

  test('exec honours its timeout: the command is killed and timed_out is true', async () => {
    const r = await agent.exec('vm-spec', ['sleep', '600'], { timeout_seconds: 2 });
    expect(r.timed_out).toBe(true);
    expect(r.exit_code).toBeNull();
    // The VM still answers afterwards.
    expect((await agent.exec('vm-spec', ['echo', 'alive'])).stdout).toBe('alive\n');
  });

  test('the serial console is an interactive shell over a WebSocket', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${agent.port}/v1/vms/vm-spec/console`, {
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
    ws.send(Buffer.from('echo console-$((40 + 2))\n'));
    for (let i = 0; i < 300 && !seen.includes('console-42'); i++)
      await new Promise((r) => setTimeout(r, 100));
    ws.close();
    expect(seen).toContain('console-42');

    const refused = new WebSocket(`ws://127.0.0.1:${agent.port}/v1/vms/vm-spec/console`, {
      headers: { authorization: 'Bearer wrong' },
    });
    const status = await new Promise<number>((resolve) => {
      refused.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      refused.once('error', () => resolve(-1));
    });
    expect(status).toBe(401);
  });

  test('the startup script and a service run with their secrets; an exposed port serves; secrets never reach host disks or logs', async () => {
    const secret = `s3cret-${Date.now()}-value`;
    // A manifest service gets the same secret in its environment (its config is in guest memory only).
    const manifest = {
      version: '1',
      services: {
        echo: { image: 'websvc', ports: [9000], env: { PORT: '9000', API_TOKEN: { secret: 'API_TOKEN' } } },
      },
    };
    const created = await agent.request<AgentVm>(
      'POST',
      '/v1/vms',
      vmRequest('vm-web', {
        manifest_inline: Buffer.from(JSON.stringify(manifest)).toString('base64'),
        startup_script:
          'mkdir -p /tmp/www\necho "token length $(expr length "$API_TOKEN")" > /tmp/www/index.html\nhttpd -p 8080 -h /tmp/www\necho started web\n',
        secrets: { API_TOKEN: secret },
        expose: [{ port: 8080, as: 'web' }],
      }),
    );
    expect(created.status).toBe(202);
    const vm = await agent.waitVm('vm-web');
    expect(vm.state).toBe('running');
    const port = vm.ports.find((p) => p.as === 'web')!;
    expect(port.port).toBe(8080);
    let body = '';
    for (let i = 0; i < 100 && !body; i++) {
      body = await fetch(`http://${vm.host_address}:${port.host_port}/index.html`)
        .then((r) => (r.ok ? r.text() : ''))
        .catch(() => '');
      if (!body) await new Promise((r) => setTimeout(r, 100));
    }
    expect(body).toBe(`token length ${secret.length}\n`);
    const log = await agent.request<string>('GET', '/v1/vms/vm-web/log');
    expect(log.status).toBe(200);
    expect(log.body).toContain('started web');
    const wait = await agent.exec('vm-web', ['orch-wait-port', '9000', '300']);
    expect(wait.exit_code, wait.stderr).toBe(0);
    const info = await agent.exec('vm-web', ['wget', '-qO-', 'http://localhost:9000/cgi-bin/info']);
    expect(info.stdout).toBe(`name=unnamed greeting=from-image token=${secret} uid=100\n`);
    expect(filesContaining(dataDir, secret)).toEqual([]);
    expect(agent.output.join('\n')).not.toContain(secret);
  });

  test('delete stops QEMU and frees the disk and the forwarded port', async () => {
    const vm = (await agent.request<AgentVm>('GET', '/v1/vms/vm-web')).body;
    const hostPort = vm.ports[0]!.host_port;
    expect(qemuPids(join(dataDir, 'vms', 'vm-web')).length).toBe(1);
    expect(await portIsFree(hostPort)).toBe(false);
    const del = await agent.request('DELETE', '/v1/vms/vm-web');
    expect(del.status).toBe(204);
    expect(qemuPids(join(dataDir, 'vms', 'vm-web'))).toEqual([]);
    expect(existsSync(join(dataDir, 'vms', 'vm-web'))).toBe(false);
    expect(await portIsFree(hostPort)).toBe(true);
    expect((await agent.request('GET', '/v1/vms/vm-web')).status).toBe(404);
    expect((await agent.request('DELETE', '/v1/vms/vm-web')).status).toBe(404);
  });

  test('a live snapshot resumes where it stopped: a counter keeps counting, uptime continues', async () => {
    await agent.exec('vm-spec', [
      'sh',
      '-c',
      '(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done) >/dev/null 2>&1 &',
    ]);
    let before = 0;
    while (before < 5) {
      before = Number((await agent.exec('vm-spec', ['cat', '/tmp/counter'])).stdout) || 0;
    }
    const uptimeBefore = Number((await agent.exec('vm-spec', ['cut', '-d.', '-f1', '/proc/uptime'])).stdout);
    const snap = await agent.request<SnapshotArtifact>('POST', '/v1/vms/vm-spec/snapshots', {
      snapshot_id: 'snap-live',
      live: true,
    });
    expect(snap.status).toBe(201);
    expect(snap.body).toMatchObject({
      snapshot_id: 'snap-live',
      vm_id: 'vm-spec',
      kind: 'live',
      arch: 'amd64',
    });
    expect(snap.body.size_bytes).toBeGreaterThan(0);
    expect(snap.body.digest).toMatch(/^[0-9a-f]{64}$/);
    const atSnapshot = Number((await agent.exec('vm-spec', ['cat', '/tmp/counter'])).stdout);
    expect(atSnapshot).toBeGreaterThanOrEqual(before);

    const restored = await agent.request<AgentVm>(
      'POST',
      '/v1/vms',
      vmRequest('vm-resumed', { restore_snapshot_id: 'snap-live' }, { cpus: 2, ram_mb: 384, storage_gb: 3 }),
    );
    expect(restored.status).toBe(202);
    const vm = await agent.waitVm('vm-resumed');
    expect(vm.state).toBe('running');
    expect(vm.restored_from).toBe('snap-live');
    // The startup log continues from the snapshot's.
    expect((await agent.request<string>('GET', '/v1/vms/vm-resumed/log')).body).toContain(
      '[orch] startup script exited with status 0',
    );
    const first = Number((await agent.exec('vm-resumed', ['cat', '/tmp/counter'])).stdout);
    expect(first).toBeGreaterThanOrEqual(before);
    let later = first;
    while (later <= first) later = Number((await agent.exec('vm-resumed', ['cat', '/tmp/counter'])).stdout);
    expect(later).toBeGreaterThan(first);
    const uptimeAfter = Number(
      (await agent.exec('vm-resumed', ['cut', '-d.', '-f1', '/proc/uptime'])).stdout,
    );
    expect(uptimeAfter).toBeGreaterThanOrEqual(uptimeBefore);
    // The process that counts is the same one, not a new one.
    expect((await agent.exec('vm-resumed', ['sh', '-c', 'ps | grep -c "[s]leep 0.1"'])).exit_code).toBe(0);
    expect((await agent.request('DELETE', '/v1/vms/vm-resumed')).status).toBe(204);
  });

  test('clones of one live snapshot each get a fresh identity: RNG, MAC and hostname differ; ports still serve', async () => {
    await agent.exec('vm-spec', [
      'sh',
      '-c',
      'mkdir -p /tmp/www && echo clone > /tmp/www/index.html && httpd -p 8080 -h /tmp/www',
    ]);
    const snap = await agent.request<SnapshotArtifact>('POST', '/v1/vms/vm-spec/snapshots', {
      snapshot_id: 'snap-clones',
      live: true,
    });
    expect(snap.status).toBe(201);
    expect(snap.body.kind).toBe('live');
    const ids = ['vm-clone-a', 'vm-clone-b'];
    for (const id of ids) {
      const r = await agent.request(
        'POST',
        '/v1/vms',
        vmRequest(id, { restore_snapshot_id: 'snap-clones', expose: [{ port: 8080, as: 'web' }] }),
      );
      expect(r.status).toBe(202);
    }
    const vms = [await agent.waitVm(ids[0]!), await agent.waitVm(ids[1]!)];
    for (const vm of vms) expect(vm.state, vm.error ?? '').toBe('running');
    const identity = async (id: string) => {
      const r = await agent.exec(id, [
        'sh',
        '-c',
        'head -c 16 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; cat /sys/class/net/eth0/address; hostname; cat /proc/sys/kernel/random/boot_id',
      ]);
      const [random, mac, hostname, bootId] = r.stdout.trim().split('\n');
      return { random, mac, hostname, bootId };
    };
    const [a, b] = [await identity(ids[0]!), await identity(ids[1]!)];
    const original = await identity('vm-spec');
    // Without a reseed both clones resume the same CRNG state and read the same bytes (measured).
    expect(a.random).toMatch(/^[0-9a-f]{32}$/);
    expect(b.random).toMatch(/^[0-9a-f]{32}$/);
    expect(a.random).not.toBe(b.random);
    expect(a.mac).toMatch(/^52:54:00(:[0-9a-f]{2}){3}$/);
    expect(new Set([a.mac, b.mac, original.mac]).size).toBe(3);
    expect(a.hostname).toBe('vm-clone-a');
    expect(b.hostname).toBe('vm-clone-b');
    expect(original.hostname).toBe('vm-spec');
    // boot_id is generated from the CRNG when first read; vm-spec had not read it before the snapshot.
    expect(a.bootId).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.bootId).not.toBe(b.bootId);
    // The guest announced its new MAC: user-mode networking still forwards the exposed port to it.
    for (const vm of vms) {
      const port = vm.ports.find((p) => p.as === 'web')!;
      let body = '';
      for (let i = 0; i < 100 && !body; i++) {
        body = await fetch(`http://${vm.host_address}:${port.host_port}/index.html`)
          .then((r) => (r.ok ? r.text() : ''))
          .catch(() => '');
        if (!body) await new Promise((r) => setTimeout(r, 100));
      }
      expect(body).toBe('clone\n');
    }
    for (const id of ids) expect((await agent.request('DELETE', `/v1/vms/${id}`)).status).toBe(204);
    expect((await agent.request('DELETE', '/v1/snapshots/snap-clones')).status).toBe(204);
  });

  test('a disk snapshot cold-boots with the files it had; its data downloads with the digest it reported', async () => {
    await agent.exec('vm-spec', ['sh', '-c', 'echo kept > /root/marker && sync']);
    const snap = await agent.request<SnapshotArtifact>('POST', '/v1/vms/vm-spec/snapshots', {
      snapshot_id: 'snap-disk',
    });
    expect(snap.status).toBe(201);
    expect(snap.body.kind).toBe('disk');
    const data = await fetch(`${agent.url}/v1/snapshots/snap-disk/data`, {
      headers: { authorization: `Bearer ${agent.token}` },
    });
    expect(data.status).toBe(200);
    const bytes = Buffer.from(await data.arrayBuffer());
    expect(bytes.length).toBe(snap.body.size_bytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(snap.body.digest);

    const uptimeOld = Number((await agent.exec('vm-spec', ['cut', '-d.', '-f1', '/proc/uptime'])).stdout);
    const restored = await agent.request<AgentVm>(
      'POST',
      '/v1/vms',
      vmRequest(
        'vm-cold',
        { restore_snapshot_id: 'snap-disk', startup_script: 'echo cold boot\n' },
        { storage_gb: 3 },
      ),
    );
    expect(restored.status).toBe(202);
    expect((await agent.waitVm('vm-cold')).state).toBe('running');
    expect((await agent.exec('vm-cold', ['cat', '/root/marker'])).stdout).toBe('kept\n');
    // A cold boot runs the startup script of the new request.
    let log = '';
    for (let i = 0; i < 100 && !log.includes('cold boot'); i++) {
      log = (await agent.request<string>('GET', '/v1/vms/vm-cold/log')).body ?? '';
      if (!log.includes('cold boot')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(log).toContain('cold boot');
    // A cold boot: no process of the old guest, a fresh uptime.
    expect((await agent.exec('vm-cold', ['sh', '-c', 'ps | grep -c "[s]leep 0.1"'])).stdout.trim()).toBe('0');
    const uptimeNew = Number((await agent.exec('vm-cold', ['cut', '-d.', '-f1', '/proc/uptime'])).stdout);
    expect(uptimeNew).toBeLessThan(uptimeOld);
    expect((await agent.request('DELETE', '/v1/vms/vm-cold')).status).toBe(204);

    // A build artifact seeds a new environment's root disk the same way (from-build mode).
    await agent.request('POST', '/v1/vms', vmRequest('vm-seeded', { seed_snapshot_id: 'snap-disk' }));
    const seeded = await agent.waitVm('vm-seeded');
    expect(seeded.state).toBe('running');
    expect(seeded.restored_from).toBeNull();
    expect((await agent.exec('vm-seeded', ['cat', '/root/marker'])).stdout).toBe('kept\n');
    expect((await agent.request('DELETE', '/v1/vms/vm-seeded')).status).toBe(204);

    expect((await agent.request('DELETE', '/v1/snapshots/snap-disk')).status).toBe(204);
    expect((await agent.request('DELETE', '/v1/snapshots/snap-disk')).status).toBe(404);
    expect((await agent.request('GET', '/v1/snapshots/snap-disk/data')).status).toBe(404);
    expect(existsSync(join(dataDir, 'snapshots', 'snap-disk'))).toBe(false);
  });

  test('max_runtime_seconds stops the VM', async () => {
    await agent.request('POST', '/v1/vms', vmRequest('vm-short', {}, { max_runtime_seconds: 3 }));
    const running = await agent.waitVm('vm-short');
    expect(running.state).toBe('running');
    expect(running.expires_at).not.toBeNull();
    const stopped = await agent.waitVm('vm-short', ['stopped', 'error']);
    expect(stopped.state).toBe('stopped');
    expect(stopped.error).toContain('max_runtime_seconds');
    expect(qemuPids(join(dataDir, 'vms', 'vm-short'))).toEqual([]);
    expect((await agent.request('DELETE', '/v1/vms/vm-short')).status).toBe(204);
    expect(existsSync(join(dataDir, 'vms', 'vm-short'))).toBe(false);
  });

  test('a root filesystem tarball imported as an image boots, with the guest runtime added; its snapshots remember it, and with one spec.image may name only it', async () => {
    const tree = mkdtempSync(join(tmpdir(), 'orch-rootfs-'));
    try {
      mkdirSync(join(tree, 'bin'));
      mkdirSync(join(tree, 'etc'));
      copyFileSync('/bin/busybox', join(tree, 'bin', 'busybox'));
      symlinkSync('busybox', join(tree, 'bin', 'sh'));
      writeFileSync(join(tree, 'etc', 'motd'), 'imported image\n');
      execFileSync('tar', ['-C', tree, '-cf', join(tree, '..', `${basename(tree)}.tar`), '.']);
      const r = spawnSync(
        process.execPath,
        [AGENT_BIN, 'image', 'import', 'imported', join(tree, '..', `${basename(tree)}.tar`)],
        {
          env: { PATH: process.env.PATH ?? '', AGENT_DATA_DIR: dataDir },
          encoding: 'utf8',
        },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain('image imported: ready');
    } finally {
      rmSync(tree, { recursive: true, force: true });
      rmSync(`${tree}.tar`, { force: true });
    }
    expect((await agent.request<AgentInfo>('GET', '/v1/info')).body.images).toEqual([
      'busybox',
      'debian-12',
      'imported',
      'websvc',
    ]);
    await agent.request('POST', '/v1/vms', vmRequest('vm-imported', {}, { image: 'imported' }));
    expect((await agent.waitVm('vm-imported')).state).toBe('running');
    expect((await agent.exec('vm-imported', ['cat', '/etc/motd'])).stdout).toBe('imported image\n');

    // Its snapshots remember the image: a VM seeded from one (no image named) and that VM's own
    // snapshot descend from "imported". With a snapshot, spec.image may name only that image.
    const snapshot = async (vm: string, id: string) =>
      expect((await agent.request('POST', `/v1/vms/${vm}/snapshots`, { snapshot_id: id })).status).toBe(201);
    await snapshot('vm-imported', 'snap-imported');
    expect((await agent.request('DELETE', '/v1/vms/vm-imported')).status).toBe(204);
    await agent.request('POST', '/v1/vms', vmRequest('vm-imp-seeded', { seed_snapshot_id: 'snap-imported' }));
    expect((await agent.waitVm('vm-imp-seeded')).state).toBe('running');
    await snapshot('vm-imp-seeded', 'snap-imp-2');
    expect((await agent.request('DELETE', '/v1/vms/vm-imp-seeded')).status).toBe(204);
    const meta = JSON.parse(readFileSync(join(dataDir, 'snapshots', 'snap-imp-2', 'snapshot.json'), 'utf8'));
    expect(meta).toMatchObject({ base_image: 'imported' });
    expect(meta.spec).not.toHaveProperty('image');
    const wrong = await agent.request<{ error: { code: string; message: string } }>(
      'POST',
      '/v1/vms',
      vmRequest('vm-imp-wrong', { restore_snapshot_id: 'snap-imp-2' }, { image: 'busybox' }),
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toEqual({
      code: 'invalid_argument',
      message:
        'spec.image "busybox" is not the image snapshot "snap-imp-2" descends from ("imported"): its disk is the root filesystem; leave spec.image out or set it to "imported"',
      details: { field: 'spec.image' },
    });
    expect((await agent.request('GET', '/v1/vms/vm-imp-wrong')).status).toBe(404);
    const same = await agent.request(
      'POST',
      '/v1/vms',
      vmRequest('vm-imp-same', { restore_snapshot_id: 'snap-imp-2' }, { image: 'imported' }),
    );
    expect(same.status).toBe(202);
    expect((await agent.waitVm('vm-imp-same')).state).toBe('running');
    expect((await agent.exec('vm-imp-same', ['cat', '/etc/motd'])).stdout).toBe('imported image\n');
    expect((await agent.request('DELETE', '/v1/vms/vm-imp-same')).status).toBe(204);
    for (const id of ['snap-imported', 'snap-imp-2'])
      expect((await agent.request('DELETE', `/v1/snapshots/${id}`)).status).toBe(204);
  });

  test('a VM whose QEMU dies is reported as error, with its port released', async () => {
    await agent.request('POST', '/v1/vms', vmRequest('vm-crash', { expose: [{ port: 80, as: 'http' }] }));
    const vm = await agent.waitVm('vm-crash');
    expect(vm.state).toBe('running');
    const [pid] = qemuPids(join(dataDir, 'vms', 'vm-crash'));
    process.kill(pid!, 'SIGKILL');
    const crashed = await agent.waitVm('vm-crash', ['error']);
    expect(crashed.error).toContain('QEMU exited unexpectedly');
    expect(await portIsFree(vm.ports[0]!.host_port)).toBe(true);
    expect((await agent.request('DELETE', '/v1/vms/vm-crash')).status).toBe(204);
    expect(existsSync(join(dataDir, 'vms', 'vm-crash'))).toBe(false);
  });

  test('--accel auto probes KVM with a real boot, caches the verdict, and what it picks runs guests', async () => {
    const dir = AgentProcess.makeDataDir();
    let other: AgentProcess | undefined;
    try {
      other = await AgentProcess.start({ dataDir: dir, env: { AGENT_ACCEL: 'auto' } });
      const info = (await other.request<AgentInfo>('GET', '/v1/info')).body;
      expect(['kvm', 'tcg']).toContain(info.accelerator);
      if (existsSync('/dev/kvm')) {
        const verdict = JSON.parse(readFileSync(join(dir, 'accel.json'), 'utf8')) as { accelerator: string };
        expect(verdict.accelerator).toBe(info.accelerator);
      }
      await other.request('POST', '/v1/vms', vmRequest('vm-auto'));
      const vm = await other.waitVm('vm-auto');
      expect(vm.state).toBe('running');
      expect(vm.accelerator).toBe(info.accelerator);
      expect((await other.exec('vm-auto', ['echo', 'ok'])).stdout).toBe('ok\n');
    } finally {
      await other?.stop();
      AgentProcess.removeDataDir(dir);
    }
  });

  test.runIf(process.getuid?.() === 0)('a full disk is a clear error at create time', async () => {
    // A 64 MiB filesystem as the data dir: less than a VM disk needs.
    const small = mkdtempSync(join(tmpdir(), 'orch-agent-small-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', small]);
    let other: AgentProcess | undefined;
    try {
      symlinkSync(join(dataDir, 'kernel'), join(small, 'kernel'));
      symlinkSync(join(dataDir, 'images'), join(small, 'images'));
      other = await AgentProcess.start({ dataDir: small });
      const r = await other.request<{
        error: { code: string; message: string; details: { reason: string } };
      }>('POST', '/v1/vms', vmRequest('vm-nospace'));
      expect(r.status).toBe(503);
      expect(r.body.error.details.reason).toBe('disk_full');
      expect(r.body.error.message).toContain('not enough free disk space');
      expect((await other.request('GET', '/v1/vms/vm-nospace')).status).toBe(404);
    } finally {
      await other?.stop();
      execFileSync('umount', [small]);
      rmSync(small, { recursive: true, force: true });
    }
  });

  test('after a SIGKILL of the agent a running VM keeps running and is re-adopted; nothing is left after delete', async () => {
    const pids = qemuPids(dataDir);
    await agent.stop('SIGKILL');
    // QEMU runs in its own session, not tied to the agent: it keeps running (pause-resume.vm.test.ts
    // checks that a counter keeps counting) and the next agent re-adopts it.
    expect(qemuPids(dataDir)).toEqual(pids);
    agent = await AgentProcess.start({ dataDir, token: agent.token });
    const vm = (await agent.request<AgentVm>('GET', '/v1/vms/vm-spec')).body;
    expect(vm.state).toBe('running');
    expect((await agent.exec('vm-spec', ['true'])).exit_code).toBe(0);
    expect((await agent.request('DELETE', '/v1/vms/vm-spec')).status).toBe(204);
    expect(qemuPids(dataDir)).toEqual([]);
    expect((await agent.request<{ vms: AgentVm[] }>('GET', '/v1/vms')).body.vms).toEqual([]);
    expect(readdirSync(join(dataDir, 'vms'))).toEqual([]);
    expect((await agent.request('DELETE', '/v1/snapshots/snap-live')).status).toBe(204);
    expect(readdirSync(join(dataDir, 'snapshots'))).toEqual([]);
  });
});
