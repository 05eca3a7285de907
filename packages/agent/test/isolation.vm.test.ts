/**
 * Network isolation and the bounded startup log, with real guests (TCG): canary HTTP servers on
 * the host's loopback, on a private and a link-local address of a veth the test creates in the
 * root namespace, and on a private and a link-local address inside a network namespace the test
 * creates (not local to the host). From a busybox and a debian-12 guest every one of them, the
 * agent's port and another environment's forwarded port are refused at once; DNS through the
 * guest's resolver answers; exposed ports serve the host. Again after a live restore, a
 * pause/resume and an agent restart. All traffic stays on this machine.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { AgentVm } from '@orch/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentProcess, qemuAvailable, vmRequest } from './agent-process.js';

const hasQemu = qemuAvailable();
const hasNft = spawnSync('sh', ['-c', 'command -v nft'], { encoding: 'utf8' }).status === 0;
if (!hasNft && process.env.CI === 'true') throw new Error('nft (Debian nftables) is required under CI');

const UIDS = { first: 912000, last: 912099 };
const TABLE = `orch_agent_${UIDS.first}_${UIDS.last}`;
/** Startup log window of the test agent (MiB): small, so that the flood rotates many times. */
const LOG_MB = 1;
const FLOOD_SECONDS = 60;

const tag = randomBytes(3).toString('hex');
const NS = `orchiso-${tag}`;
const VETH_HOST = `oi${tag}h`;
const VETH_NS = `oi${tag}n`;
/** Addresses the test gives its veth: local to the host (root side) and not (namespace side). */
const ROOT_PRIVATE = '10.213.7.1';
const ROOT_LINK_LOCAL = '169.254.213.1';
const NS_PRIVATE = '10.213.7.2';
const NS_LINK_LOCAL = '169.254.213.2';

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

function canary(host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer((_, res) => res.end('canary'));
    s.once('error', reject);
    s.listen(0, host, () => resolve(s));
  });
}
const portOf = (s: Server) => (s.address() as AddressInfo).port;

async function fetchText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  return res.text();
}

/** A guest's exposed port from the host, once its server listens (the startup script starts it). */
async function served(url: string): Promise<string> {
  for (let i = 0; ; i++) {
    try {
      return await fetchText(url);
    } catch (err) {
      if (i >= 300) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

describe.skipIf(!hasQemu || !hasNft)('network isolation and bounded startup log (real QEMU, TCG)', () => {
  let dataDir: string;
  let agent: AgentProcess;
  const servers: Server[] = [];
  let nsCanary: ChildProcess | undefined;
  let nsPort = 0;
  /** Targets every guest must be refused: [label, host, port]. */
  let targets: [string, string, number][] = [];

  beforeAll(async () => {
    ip('link', 'add', VETH_HOST, 'type', 'veth', 'peer', 'name', VETH_NS);
    ip('netns', 'add', NS);
    ip('link', 'set', VETH_NS, 'netns', NS);
    ip('addr', 'add', `${ROOT_PRIVATE}/24`, 'dev', VETH_HOST);
    ip('addr', 'add', `${ROOT_LINK_LOCAL}/24`, 'dev', VETH_HOST);
    ip('link', 'set', VETH_HOST, 'up');
    ip('-n', NS, 'addr', 'add', `${NS_PRIVATE}/24`, 'dev', VETH_NS);
    ip('-n', NS, 'addr', 'add', `${NS_LINK_LOCAL}/24`, 'dev', VETH_NS);
    ip('-n', NS, 'link', 'set', VETH_NS, 'up');
    ip('-n', NS, 'link', 'set', 'lo', 'up');
    const loop = await canary('127.0.0.1');
    const priv = await canary(ROOT_PRIVATE);
    const link = await canary(ROOT_LINK_LOCAL);
    servers.push(loop, priv, link);
    // The namespace's canary: a node HTTP server on every address of the namespace.
    nsCanary = spawn(
      'ip',
      [
        'netns',
        'exec',
        NS,
        process.execPath,
        '-e',
        "const s=require('http').createServer((q,r)=>r.end('canary')).listen(0,'0.0.0.0',()=>console.log(s.address().port))",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    nsPort = await new Promise<number>((resolve) =>
      nsCanary!.stdout!.once('data', (b: Buffer) => resolve(Number(b.toString().trim()))),
    );
    // Control: from the host, every canary answers.
    for (const url of [
      `http://127.0.0.1:${portOf(loop)}/`,
      `http://${ROOT_PRIVATE}:${portOf(priv)}/`,
      `http://${ROOT_LINK_LOCAL}:${portOf(link)}/`,
      `http://${NS_PRIVATE}:${nsPort}/`,
      `http://${NS_LINK_LOCAL}:${nsPort}/`,
    ])
      expect(await fetchText(url), url).toBe('canary');
    dataDir = AgentProcess.makeDataDir();
    agent = await AgentProcess.start({
      dataDir,
      env: { AGENT_VM_UIDS: `${UIDS.first}-${UIDS.last}`, AGENT_STARTUP_LOG_MB: String(LOG_MB) },
    });
    targets = [
      ['host loopback canary via 10.0.2.2', '10.0.2.2', portOf(loop)],
      ["the agent's API via 10.0.2.2", '10.0.2.2', agent.port],
      ["host's private address", ROOT_PRIVATE, portOf(priv)],
      ["host's link-local address", ROOT_LINK_LOCAL, portOf(link)],
      ['private address off the host', NS_PRIVATE, nsPort],
      ['link-local address off the host', NS_LINK_LOCAL, nsPort],
    ];
  }, 600_000);

  afterAll(async () => {
    await agent?.stop();
    if (dataDir) AgentProcess.removeDataDir(dataDir);
    for (const s of servers) s.close();
    nsCanary?.kill();
    spawnSync('ip', ['netns', 'del', NS]);
    spawnSync('ip', ['link', 'del', VETH_HOST]);
    spawnSync('nft', ['delete', 'table', 'inet', TABLE]);
  });

  /** Connects from the guest to host:port; the guest's own tool's error text (curl on debian, nc on busybox). */
  async function connectFrom(vm: string, debian: boolean, host: string, port: number) {
    const argv = debian
      ? ['curl', '-sS', '-o', '/dev/null', '--max-time', '20', `http://${host}:${port}/`]
      : ['sh', '-c', `nc -w 20 ${host} ${port} </dev/null`];
    return agent.exec(vm, argv, { timeout_seconds: 60 });
  }

  /** Every target refused at once (a reset, not a timeout), DNS answering, from `vm`. */
  async function expectIsolated(vm: string, debian: boolean, others: [string, number][] = []) {
    for (const [label, host, port] of [...targets, ...others.map(([l, p]) => [l, '10.0.2.2', p] as const)]) {
      const r = await connectFrom(vm, debian, host, port);
      expect(r.exit_code, `${vm} -> ${label} (${host}:${port}): ${r.stderr}`).not.toBe(0);
      expect(r.stderr, `${vm} -> ${label}`).toMatch(/Connection refused|Couldn't connect to server/);
      expect(r.stderr, `${vm} -> ${label}`).not.toMatch(/timed out/i);
    }
    // DNS through the guest's resolver (10.0.2.3 -> the host's resolver): any answer proves the path.
    const dns = debian
      ? await agent.exec(vm, ['python3', '-c', DNS_PROBE], { timeout_seconds: 60 })
      : await agent.exec(vm, ['sh', '-c', 'nslookup deb.debian.org 2>&1'], { timeout_seconds: 60 });
    const text = dns.stdout + dns.stderr;
    if (debian) expect(text, `${vm} DNS`).toMatch(/^answer rcode \d+/);
    else {
      expect(text, `${vm} DNS`).toContain('deb.debian.org');
      expect(text, `${vm} DNS`).not.toMatch(/timed out|no servers could be reached/);
    }
  }

  const WEB_SCRIPT =
    'mkdir -p /tmp/www && echo canary-web > /tmp/www/index.html && httpd -p 8080 -h /tmp/www\n';

  async function createVm(id: string, over: Record<string, unknown>, spec: Record<string, unknown> = {}) {
    const r = await agent.request<AgentVm>('POST', '/v1/vms', vmRequest(id, over, spec));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
  }
  async function running(id: string): Promise<AgentVm> {
    const vm = await agent.waitVm(id);
    expect(vm.state, `${id}: ${vm.error}`).toBe('running');
    return vm;
  }
  const hostPort = (vm: AgentVm) => vm.ports.find((p) => p.port === 8080)!.host_port;

  /** The uid of the QEMU process of `id` (from its record's pid). */
  function qemuUid(id: string): number {
    const rec = JSON.parse(readFileSync(join(dataDir, 'vms', id, 'vm.json'), 'utf8')) as { pid: number };
    const status = readFileSync(`/proc/${rec.pid}/status`, 'utf8');
    return Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
  }

  test('a startup log flood keeps at most the window on disk and the log API follows it by absolute offsets', async () => {
    await createVm('flood', {
      startup_script: `timeout ${FLOOD_SECONDS} yes orch-flood-0123456789abcdef; echo flood-done\n`,
    });
    await running('flood');
    const dir = join(dataDir, 'vms', 'flood');
    const onDisk = () =>
      ['startup.log', 'startup.log.1'].reduce((n, f) => {
        try {
          return n + statSync(join(dir, f)).size;
        } catch {
          return n;
        }
      }, 0);
    let offset = 0;
    let peak = 0;
    let tail = '';
    let windows = 0;
    // Follow like `orch logs -f`: ask from the end of the last window; a window may start later
    // than asked (rotation dropped bytes), never earlier.
    for (;;) {
      const r = await agent.request<string>('GET', `/v1/vms/flood/log?offset=${offset}`);
      expect(r.status).toBe(200);
      const start = Number(r.headers.get('x-log-offset'));
      const size = Number(r.headers.get('x-log-size'));
      expect(start).toBeGreaterThanOrEqual(offset);
      const text = typeof r.body === 'string' ? r.body : '';
      offset = start + Buffer.byteLength(text);
      expect(offset).toBeLessThanOrEqual(size);
      tail = (tail + text).slice(-200);
      peak = Math.max(peak, onDisk());
      windows++;
      if (tail.includes('[orch] startup script exited')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(tail).toContain('flood-done');
    expect(peak).toBeLessThanOrEqual(LOG_MB * 2 ** 20);
    expect(onDisk()).toBeLessThanOrEqual(LOG_MB * 2 ** 20);
    // The guest wrote far more than the window: the offsets count it all.
    expect(offset).toBeGreaterThan(4 * LOG_MB * 2 ** 20);
    expect(windows).toBeGreaterThan(1);
    expect((await agent.request('DELETE', '/v1/vms/flood')).status).toBe(204);
  }, 600_000);

  test('guests reach neither the host nor private or link-local addresses nor each other; exposed ports serve; DNS answers', async () => {
    await createVm('web', { startup_script: WEB_SCRIPT, expose: [{ port: 8080, as: 'web' }] });
    await createVm('deb', {}, { image: 'debian-12', ram_mb: 512 });
    const web = await running('web');
    await running('deb');
    for (const id of ['web', 'deb']) {
      const uid = qemuUid(id);
      expect(uid).toBeGreaterThanOrEqual(UIDS.first);
      expect(uid).toBeLessThanOrEqual(UIDS.last);
    }
    expect(qemuUid('web')).not.toBe(qemuUid('deb'));
    expect(await served(`http://127.0.0.1:${hostPort(web)}/`)).toBe('canary-web\n');
    await expectIsolated('web', false);
    // deb also tries web's forwarded port: another environment is not reachable from a guest.
    await expectIsolated('deb', true, [["web's forwarded port", hostPort(web)]]);
    const info = await agent.request<{ network_isolation: unknown }>('GET', '/v1/info');
    expect(info.body.network_isolation).toEqual({ mode: 'on', active: true });
  }, 900_000);

  test('the same after a live restore and a pause/resume', async () => {
    const snap = await agent.request('POST', '/v1/vms/web/snapshots', {
      snapshot_id: 'web-live',
      live: true,
    });
    expect(snap.status, JSON.stringify(snap.body)).toBe(201);
    await createVm('web2', { restore_snapshot_id: 'web-live', expose: [{ port: 8080, as: 'web' }] });
    const web2 = await running('web2');
    expect(qemuUid('web2')).not.toBe(qemuUid('web'));
    expect(await served(`http://127.0.0.1:${hostPort(web2)}/`)).toBe('canary-web\n');
    const web = await agent.waitVm('web');
    await expectIsolated('web2', false, [["web's forwarded port", hostPort(web)]]);
    const uid = qemuUid('deb');
    expect((await agent.request('POST', '/v1/vms/deb/pause')).status).toBe(200);
    expect((await agent.request('POST', '/v1/vms/deb/resume')).status).toBe(200);
    expect(qemuUid('deb')).toBe(uid);
    await expectIsolated('deb', true, [["web2's forwarded port", hostPort(web2)]]);
  }, 900_000);

  test('the same after an agent restart (VMs suspended and resumed under their own uids)', async () => {
    const uids = { web: qemuUid('web'), deb: qemuUid('deb') };
    const token = agent.token;
    expect(await agent.stop()).toBe(0);
    agent = await AgentProcess.start({
      dataDir,
      token,
      env: { AGENT_VM_UIDS: `${UIDS.first}-${UIDS.last}`, AGENT_STARTUP_LOG_MB: String(LOG_MB) },
    });
    targets = targets.map(([l, h, p]) => (l.startsWith("the agent's") ? [l, h, agent.port] : [l, h, p]));
    const web = await agent.waitVm('web', ['running', 'error']);
    expect(web.state).toBe('running');
    expect((await agent.waitVm('deb', ['running', 'error'])).state).toBe('running');
    expect(qemuUid('web')).toBe(uids.web);
    expect(qemuUid('deb')).toBe(uids.deb);
    expect(await served(`http://127.0.0.1:${hostPort(web)}/`)).toBe('canary-web\n');
    await expectIsolated('web', false);
    await expectIsolated('deb', true, [["web's forwarded port", hostPort(web)]]);
  }, 900_000);
});

/** A raw DNS query (A deb.debian.org) to the guest's resolver; prints the answer's rcode. */
const DNS_PROBE = `
import socket, struct
q = struct.pack('>HHHHHH', 0x4f52, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(p)]) + p.encode() for p in 'deb.debian.org'.split('.')) + b'\\0' + struct.pack('>HH', 1, 1)
ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(15)
s.sendto(q, (ns, 53))
d = s.recv(512)
print('answer rcode', d[3] & 15)
`;
