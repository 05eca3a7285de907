import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess, qemuAvailable } from '@orch/agent/testing';
import type { Environment, EnvironmentMove, HostDrain, Snapshot } from '@orch/protocol';
// @ts-expect-error s3rver ships no types
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HostNetwork, netnsAvailable } from './netns.js';
import { OrchdProcess } from './orchd-process.js';
import { orchCli } from './run-cli.js';

/**
 * Snapshots and environments travel between hosts: two `orch-agent`s, each in its own network
 * namespace with its own address, registered with one orchd (embedded store), real VMs under TCG.
 * One pass, as few VMs as possible, several checks per VM:
 *
 * e1 boots debian-12 on a, e2 busybox on b; a live snapshot exported to a directory (requested at create) and to an S3
 * server (s3rver, on the bridge) becomes `ready`; with its host cordoned it restores on the other
 * host (fetched from the source agent), the counter continuing; `orch host drain` moves a running
 * environment (id, memory, secret, counter kept; host, ports and URL changed; downtime shown);
 * a drain with nowhere to go lists each environment with why; an orchd SIGKILL and an agent SIGKILL
 * in the middle of drains lose no environment (every move done or rolled back, every environment
 * running and counting); after its host is removed the snapshot restores from an export, and a
 * corrupted export is refused by its digest; exports outlive the deleted snapshot; the moves and
 * exports are on GET /v1/events.
 */
const MASTER = `m-${randomBytes(8).toString('hex')}`;
/** The secret, a page on port 8080 (busybox httpd, or Python's on debian-12), a counter in memory. */
const counterScript = (image: string | undefined) =>
  [
    'echo "$ORCH_VM_SECRET" > /tmp/secret',
    image === 'debian-12'
      ? 'mkdir -p /www && hostname > /www/index.html && (python3 -m http.server 8080 -d /www >/dev/null 2>&1 &)'
      : 'mkdir -p /www && hostname > /www/index.html && httpd -p 8080 -h /www',
    '(i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &',
    '',
  ].join('\n');

describe.skipIf(!qemuAvailable() || !netnsAvailable())(
  'snapshots and environments travel between hosts',
  () => {
    let net: HostNetwork;
    let orchd: OrchdProcess;
    let s3: { close: () => Promise<void> } | undefined;
    const agents: Record<string, AgentProcess> = {};
    const dataDirs: Record<string, string> = {};
    const tokens: Record<string, string> = {
      a: `tok-a-${randomBytes(6).toString('hex')}`,
      b: `tok-b-${randomBytes(6).toString('hex')}`,
    };
    const root = mkdtempSync(join(tmpdir(), 'orch-travel-'));
    const exportsDir = join(root, 'exports');
    const orchdData = join(root, 'orchd');
    const config = join(root, 'cli');
    const orch = (...args: string[]) => orchCli(config, ...args);
    let s3Port = 0;

    const api = async <T = unknown>(method: string, path: string, body?: unknown) => {
      const r = await orchd.request(method, path, { token: MASTER, ...(body !== undefined ? { body } : {}) });
      return r as { status: number; body: T };
    };
    const env = async (id: string) => (await api<Environment>('GET', `/v1/environments/${id}`)).body;
    const exec = async (id: string, script: string) => {
      const r = await api<{ exit_code: number; stdout_base64: string }>(
        'POST',
        `/v1/environments/${id}?action=exec`,
        {
          argv: ['sh', '-c', script],
        },
      );
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return Buffer.from(r.body.stdout_base64, 'base64').toString('utf8').trim();
    };
    const counter = async (id: string) => Number(await exec(id, 'cat /tmp/counter'));
    /** The environment once it runs; one that fails is an error saying why (its last_error). */
    const waitRunning = async (id: string) => {
      for (const deadline = Date.now() + 180_000; Date.now() < deadline; ) {
        const e = await env(id);
        if (e.state === 'running') return e;
        if (e.state === 'error') throw new Error(`environment ${id} failed: ${e.last_error}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`environment ${id} is not running after 180 s: ${(await env(id)).state}`);
    };
    const startS3 = async () => {
      const server = new S3rver({
        port: s3Port,
        address: net.gateway,
        silent: true,
        directory: join(root, 's3'),
        configureBuckets: [{ name: 'orch-exports' }],
      });
      await server.run();
      s3 = server;
    };
    const startAgent = async (name: 'a' | 'b') => {
      const h = net.host(name);
      agents[name] = await AgentProcess.start({
        dataDir: dataDirs[name]!,
        netns: h.netns,
        host: h.address,
        token: tokens[name]!,
        env: {
          AGENT_PORT: '9090',
          AGENT_ID: name,
          AGENT_S3_ENDPOINT: `http://${net.gateway}:${s3Port}`,
          AGENT_S3_ACCESS_KEY_ID: 'S3RVER',
          AGENT_S3_SECRET_ACCESS_KEY: 'S3RVER',
          AGENT_EXPORT_ROOTS: exportsDir,
        },
      });
    };
    const startOrchd = async () => {
      orchd = await OrchdProcess.start({
        ORCH_DATA_DIR: orchdData,
        ORCH_AUTH_TOKEN: MASTER,
        ORCH_RECONCILE_INTERVAL_SEC: '1',
        ORCH_HOST_HEALTH_INTERVAL_SEC: '1',
      });
    };
    /** Follows the moves of a drain until each is done or rolled back. */
    const settle = async (ids: string[]) => {
      await expect
        .poll(
          async () => {
            const { moves } = (await api<{ moves: EnvironmentMove[] }>('GET', '/v1/moves')).body;
            return moves
              .filter((m) => ids.includes(m.id))
              .every((m) => ['done', 'rolled_back'].includes(m.state));
          },
          { timeout: 300_000, interval: 500 },
        )
        .toBe(true);
      return (await api<{ moves: EnvironmentMove[] }>('GET', '/v1/moves')).body.moves.filter((m) =>
        ids.includes(m.id),
      );
    };
    /** Waits until a move of these is in one of `states` (so a kill lands in the middle of it). */
    const midMove = async (ids: string[], states = ['pausing', 'transferring', 'restoring']) => {
      await expect
        .poll(
          async () => {
            const { moves } = (await api<{ moves: EnvironmentMove[] }>('GET', '/v1/moves')).body;
            return moves.some((m) => ids.includes(m.id) && states.includes(m.state));
          },
          { timeout: 120_000, interval: 20 },
        )
        .toBe(true);
    };

    beforeAll(async () => {
      net = new HostNetwork(['a', 'b']);
      const { freePort } = await import('@support/pg/testing');
      s3Port = await freePort();
      await startS3();
      for (const name of ['a', 'b'] as const) {
        dataDirs[name] = AgentProcess.makeDataDir();
        await startAgent(name);
      }
      await startOrchd();
      expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
      for (const name of ['a', 'b'] as const) {
        const reg = await orch(
          'host',
          'register',
          '--url',
          agents[name]!.url,
          '--id',
          name,
          '--token',
          tokens[name]!,
        );
        expect(reg.code, reg.stderr).toBe(0);
      }
    }, 300_000);

    afterAll(async () => {
      await orchd?.stop();
      for (const a of Object.values(agents)) await a.stop('SIGKILL');
      for (const dir of Object.values(dataDirs)) AgentProcess.removeDataDir(dir);
      await s3?.close();
      net?.remove();
      rmSync(root, { recursive: true, force: true });
    });

    test('exports, cross-host restore, drain, crashes mid-drain, restore from an export', async () => {
      // Two environments on the two hosts. Each path below (cross-host restore, drain, restore
      // from an export) starts e1 from a snapshot of a debian-12 guest.
      const create = async (task: string, image?: string) => {
        const r = await api<Environment>('POST', '/v1/environments', {
          task_id: task,
          spec: {
            cpus: 1,
            ram_mb: 256,
            storage_gb: image ? 2 : 1,
            max_runtime_seconds: 3600,
            ...(image ? { image } : {}),
          },
          manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
          startup_script: counterScript(image),
          secrets: {},
          expose: [{ port: 8080, as: 'web' }],
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return waitRunning(r.body.id);
      };
      // e1 (debian-12) goes to a (b cordoned meanwhile), then e2 (busybox) spreads to b.
      expect((await api('POST', '/v1/hosts/b?action=cordon')).status).toBe(200);
      const e1 = await create('one', 'debian-12');
      expect((await api('POST', '/v1/hosts/b?action=uncordon')).status).toBe(200);
      const e2 = await create('two');
      expect([e1.host_id, e2.host_id]).toEqual(['a', 'b']);
      await expect.poll(() => counter(e1.id), { timeout: 30_000 }).toBeGreaterThan(3);
      const secret1 = await exec(e1.id, 'cat /tmp/secret');
      const secret2 = await exec(e2.id, 'cat /tmp/secret');
      expect(secret1).toMatch(/^[A-Za-z0-9_-]{40,}$/);

      // A live snapshot of e1 (on a), exported to a directory as requested at create, then to S3.
      const bad = await api<{ error: { code: string; message: string } }>(
        'POST',
        `/v1/environments/${e1.id}/snapshots`,
        {
          live: true,
          export_destination: 'file:///tmp/../etc',
        },
      );
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_argument');
      // Outside the agent's export roots (the agent runs as root): refused at the request, by the
      // agent, and nothing is created there.
      const probe = `/etc/orch-probe-${randomBytes(4).toString('hex')}`;
      const outside = await api<{ error: { code: string; details: { reason: string } } }>(
        'POST',
        `/v1/environments/${e1.id}/snapshots`,
        { export_destination: `file://${probe}` },
      );
      expect(outside.status).toBe(400);
      expect(outside.body.error).toMatchObject({
        code: 'invalid_argument',
        details: { reason: 'outside_export_roots' },
      });
      expect(existsSync(probe)).toBe(false);
      const created = await api<Snapshot>('POST', `/v1/environments/${e1.id}/snapshots`, {
        live: true,
        export_destination: `file://${exportsDir}`,
        export_status: 'queued-by-test',
      });
      expect(created.status).toBe(201);
      const snap = created.body;
      expect(snap).toMatchObject({ kind: 'live', state: 'ready' });
      // The caller's status is stored verbatim; the exporter then writes its outcome over it.
      expect(['queued-by-test', 'ready']).toContain(snap.exports?.[0]?.status);
      const exported = await orch('-o', 'json', 'snapshot', 'export', snap.id, 's3://orch-exports/travel');
      expect(exported.code, exported.stderr).toBe(0);
      await expect
        .poll(
          async () =>
            (await api<Snapshot>('GET', `/v1/snapshots/${snap.id}`)).body.exports?.map((e) => e.status),
          {
            timeout: 120_000,
          },
        )
        .toEqual(['ready', 'ready']);
      const withExports = (await api<Snapshot>('GET', `/v1/snapshots/${snap.id}`)).body;
      expect(withExports.export_ref).toBe(`file://${exportsDir}/${snap.id}`);
      expect(existsSync(join(exportsDir, snap.id, 'manifest.json'))).toBe(true);
      const unknown = await api<{ error: { code: string } }>('POST', '/v1/snapshots/snap_nope/exports', {
        destination: `file://${exportsDir}`,
      });
      expect(unknown.status).toBe(404);

      // Cross-host restore: a is cordoned, so b fetches the artifact from a and resumes it.
      expect((await orch('host', 'cordon', 'a')).code).toBe(0);
      const restored = await api<Environment>('POST', `/v1/snapshots/${snap.id}/restore`, {
        task_id: 'copy',
      });
      expect(restored.status, JSON.stringify(restored.body)).toBe(201);
      const copy = await waitRunning(restored.body.id);
      expect(copy.host_id).toBe('b');
      expect(copy.spec.image).toBe('debian-12');
      expect(await exec(copy.id, 'cat /tmp/secret')).toBe(secret1);
      expect(await counter(copy.id)).toBeGreaterThan(3);
      expect((await api('DELETE', `/v1/environments/${copy.id}`)).status).toBe(200);

      // Drain a: e1 moves to b by live snapshot; its id, memory, secret and counter stay.
      const before = await counter(e1.id);
      const oldUrl = e1.ports[0]!.url;
      const drained = await orch('host', 'drain', 'a');
      expect(drained.code, drained.stderr).toBe(0);
      expect(drained.stdout).toMatch(new RegExp(`${e1.id}\\s+a\\s+b\\s+done\\s+\\d+ ms`));
      const moved = await env(e1.id);
      expect(moved).toMatchObject({
        id: e1.id,
        state: 'running',
        host_id: 'b',
        last_move: { from_host_id: 'a', to_host_id: 'b' },
        spec: { image: 'debian-12' },
      });
      expect(moved.last_move!.downtime_ms).toBeGreaterThan(0);
      expect(moved.ports[0]!.url).not.toBe(oldUrl);
      expect(moved.ports[0]!.host).toBe(net.host('b').address);
      expect(await (await fetch(moved.ports[0]!.url)).text()).toBe(`${e1.id}\n`);
      expect(await exec(e1.id, 'cat /tmp/secret')).toBe(secret1);
      const after = await counter(e1.id);
      expect(after).toBeGreaterThan(before);
      await expect.poll(() => counter(e1.id), { timeout: 30_000 }).toBeGreaterThan(after);

      // Nowhere to go (a is cordoned): both environments on b are listed with why, and stay.
      const stuck = await api<HostDrain>('POST', '/v1/hosts/b?action=drain');
      expect(stuck.status).toBe(200);
      expect(stuck.body.moves).toEqual([]);
      expect(stuck.body.unmovable.map((u) => u.environment_id).sort()).toEqual([e1.id, e2.id].sort());
      for (const u of stuck.body.unmovable) expect(u.reason).toMatch(/a: cordoned/);
      expect((await orch('host', 'uncordon', 'a')).code).toBe(0);
      expect((await orch('host', 'uncordon', 'b')).code).toBe(0);

      // Drain b with a SIGKILL of orchd in the middle: the restarted orchd's reconciler takes the
      // moves over (their lease runs out) and finishes or rolls back each.
      const drainB = await api<HostDrain>('POST', '/v1/hosts/b?action=drain');
      expect(drainB.body.moves).toHaveLength(2);
      const idsB = drainB.body.moves.map((m) => m.id);
      await midMove(idsB);
      await orchd.kill('SIGKILL');
      await startOrchd();
      for (const m of await settle(idsB)) expect(['done', 'rolled_back']).toContain(m.state);
      for (const e of [e1, e2]) {
        const now = await waitRunning(e.id);
        expect(['a', 'b']).toContain(now.host_id);
        const c = await counter(e.id);
        await expect.poll(() => counter(e.id), { timeout: 30_000 }).toBeGreaterThan(c);
      }

      // Drain whichever host holds them with a SIGKILL of that (source) agent mid-move: no record
      // is lost; once the agent is back every move is done or rolled back and both run and count.
      const holder = (await env(e1.id)).host_id as 'a' | 'b';
      expect((await api('POST', `/v1/hosts/${holder === 'a' ? 'b' : 'a'}?action=uncordon`)).status).toBe(200);
      const drainH = await api<HostDrain>('POST', `/v1/hosts/${holder}?action=drain`);
      const idsH = drainH.body.moves.map((m) => m.id);
      expect(idsH.length).toBeGreaterThan(0);
      // Killed once a guest is paused and its state on the way (the VM survives on disk; an agent
      // killed in the middle of saving a guest's memory is the agent restart case of its README).
      await midMove(idsH, ['transferring', 'restoring']);
      await agents[holder]!.stop('SIGKILL');
      for (const e of [e1, e2]) expect((await env(e.id)).id).toBe(e.id);
      await startAgent(holder);
      for (const m of await settle(idsH)) expect(['done', 'rolled_back']).toContain(m.state);
      for (const e of [e1, e2]) {
        const now = await waitRunning(e.id);
        expect(await exec(e.id, 'cat /tmp/secret')).toBe(e.id === e1.id ? secret1 : secret2);
        const c = await counter(now.id);
        await expect.poll(() => counter(e.id), { timeout: 30_000 }).toBeGreaterThan(c);
      }

      // The snapshot's host (a) is removed: the restore comes from an export. A corrupted directory
      // export (and S3 down) is refused by the digest; with S3 back, b restores from it.
      for (const e of [e1, e2]) expect((await api('DELETE', `/v1/environments/${e.id}`)).status).toBe(200);
      await api('POST', '/v1/hosts/a?action=uncordon');
      await api('POST', '/v1/hosts/b?action=uncordon');
      expect((await api('DELETE', '/v1/hosts/a')).status).toBe(204);
      // b's copy from the first restore would serve it: drop it, so that b must fetch again.
      expect((await agents.b!.request('DELETE', `/v1/snapshots/${snap.id}`)).status).toBe(204);
      const diskFile = join(exportsDir, snap.id, 'disk.qcow2');
      const bytes = readFileSync(diskFile);
      bytes[4096] = (bytes[4096] ?? 0) ^ 0xff;
      writeFileSync(diskFile, bytes);
      await s3!.close();
      s3 = undefined;
      const refused = await api<{ error: { code: string; message: string } }>(
        'POST',
        `/v1/snapshots/${snap.id}/restore`,
        {
          task_id: 'from-export',
        },
      );
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('conflict');
      expect(refused.body.error.message).toMatch(/does not match its digest/);
      await startS3();
      const fromExport = await api<Environment>('POST', `/v1/snapshots/${snap.id}/restore`, {
        task_id: 'from-export',
      });
      expect(fromExport.status, JSON.stringify(fromExport.body)).toBe(201);
      const revived = await waitRunning(fromExport.body.id);
      expect(revived.host_id).toBe('b');
      expect(revived.spec.image).toBe('debian-12');
      expect(await exec(revived.id, 'cat /tmp/secret')).toBe(secret1);

      // Retention: deleting the snapshot keeps its exported objects (documented decision).
      expect((await api('DELETE', `/v1/environments/${revived.id}`)).status).toBe(200);
      expect((await api('DELETE', `/v1/snapshots/${snap.id}`)).status).toBe(204);
      expect(existsSync(join(exportsDir, snap.id, 'manifest.json'))).toBe(true);

      // Exports and moves are on the event stream.
      const ac = new AbortController();
      const res = await fetch(`${orchd.url}/v1/events?after=0`, {
        headers: { authorization: `Bearer ${MASTER}` },
        signal: ac.signal,
      });
      let text = '';
      const reader = res.body!.getReader();
      const deadline = Date.now() + 20_000;
      while (
        Date.now() < deadline &&
        !(text.includes('environment_move.updated') && text.includes('snapshot_export.updated'))
      ) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString('utf8');
      }
      ac.abort();
      expect(text).toContain('event: snapshot_export.updated');
      expect(text).toMatch(/"status":"ready"/);
      expect(text).toContain('event: environment_move.updated');
      expect(text).toMatch(/"state":"done"/);
    }, 1_500_000);
  },
);
