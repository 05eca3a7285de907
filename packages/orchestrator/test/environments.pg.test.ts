import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Environment, Snapshot } from '@orch/protocol';
import { describeStores, pgTest, type TestPostgres } from '@support/pg/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { WebSocket } from 'ws';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * Environments and snapshots end to end: `orch` → `orchd` → a test agent that speaks the agent
 * protocol (the QEMU agent has its own VM tests), on both stores.
 */
describeStores('environments on the %s store', (store) => {
  let pg: TestPostgres | undefined;
  let env: Record<string, string>;
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const config = mkdtempSync(join(tmpdir(), 'orch-env-cli-'));
  const orch = (...args: string[]) => orchCli(config, ...args);
  const as = { token: MASTER };
  const getEnv = async (id: string) =>
    (await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const opened = await openStore(store);
    pg = opened.server;
    env = orchdStoreEnv(opened, await tempDir('orchd-data-'));
    env = { ...env, ORCH_AUTH_TOKEN: MASTER, ORCH_RECONCILE_INTERVAL_SEC: '1', ORCH_AGENT_TIMEOUT_SEC: '3' };
    orchd = await OrchdProcess.start(env);
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
    rmSync(config, { recursive: true, force: true });
  });

  describe('the whole path', () => {
    test('up, exec, disk and live snapshots, restore each, delete everything', async () => {
      // up: secrets named by the definition are required and posted; nothing else.
      const up = await orch(
        '-o',
        'json',
        'up',
        'examples/services-secrets',
        '--secret',
        'db_pw=pw1',
        '--secret',
        'stripe_key=sk',
        '--secret',
        'extra=x',
      );
      expect(up.stderr).toContain('ignoring secret extra');
      expect(up.code).toBe(0);
      const created = JSON.parse(up.stdout) as Environment;
      expect(created).toMatchObject({
        state: 'running',
        host_id: 'h1',
        task_id: 'services-secrets',
        secret_names: ['db_pw', 'stripe_key'],
      });
      expect(created.ports).toEqual([
        {
          port: 8080,
          as: 'api',
          host: '127.0.0.1',
          host_port: expect.any(Number),
          url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        },
      ]);
      const sent = agent.created.find((c) => c.id === created.id)!;
      expect(Object.keys(sent.secrets).sort()).toEqual(['ORCH_VM_SECRET', 'db_pw', 'stripe_key']);
      expect(sent.secrets.db_pw).toBe('pw1');
      expect(sent.spec).toEqual({
        cpus: 2,
        ram_mb: 4096,
        storage_gb: 10,
        max_runtime_seconds: 7200,
        image: 'debian-12',
      });
      expect(JSON.stringify(await getEnv(created.id))).not.toContain('pw1');

      // exec: output and the remote exit status.
      const ok = await orch('exec', created.id, '--', 'echo', 'hello');
      expect(ok).toEqual({ code: 0, stdout: 'echo hello\n', stderr: '' });
      const failed = await orch('exec', created.id, '--', 'false');
      expect(failed.code).toBe(1);
      expect(failed.stderr).toBe('failed\n');
      const slow = await orch('exec', created.id, '--timeout', '1', '--', 'sleep', '100');
      expect(slow.code).toBe(124);

      // Snapshots: disk and live; odd mode and export status are kept verbatim.
      const disk = JSON.parse(
        (
          await orch(
            '-o',
            'json',
            'snapshot',
            'create',
            created.id,
            '--mode',
            'Weird-Mode',
            '--export-to',
            's3://bucket-b/k',
            '--export-status',
            'queued?',
          )
        ).stdout,
      ) as Snapshot;
      expect(disk).toMatchObject({
        vm_id: created.id,
        task_id: 'services-secrets',
        kind: 'disk',
        state: 'ready',
        mode: 'Weird-Mode',
        arch: 'amd64',
        size_bytes: 4096,
      });
      expect(disk.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(disk.exports).toEqual([
        {
          destination: 's3://bucket-b/k',
          status: 'queued?',
          requested_at: expect.any(String),
          updated_at: expect.any(String),
        },
      ]);
      const live = JSON.parse(
        (await orch('-o', 'json', 'snapshot', 'create', created.id, '--live')).stdout,
      ) as Snapshot;
      expect(live).toMatchObject({ kind: 'live', state: 'ready', mode: 'manual' });

      // Restore each: a new environment on the same host, started from the snapshot. Its record
      // keeps the image it descends from (debian-12); the agent is sent the snapshot alone (its
      // disk is the root filesystem).
      for (const snap of [disk, live]) {
        const r = await orch('-o', 'json', 'snapshot', 'restore', snap.id);
        expect(r.stderr).toBe('');
        const restored = JSON.parse(r.stdout) as Environment;
        expect(restored).toMatchObject({
          state: 'running',
          host_id: 'h1',
          restored_from_snapshot_id: snap.id,
          task_id: 'services-secrets',
          spec: { image: 'debian-12' },
        });
        const request = agent.created.find((c) => c.id === restored.id)!;
        expect(request).toMatchObject({
          restore_snapshot_id: snap.id,
          secrets: { db_pw: 'pw1' },
        });
        expect(request.spec).toEqual({ cpus: 2, ram_mb: 4096, storage_gb: 10, max_runtime_seconds: 7200 });
        expect(request).not.toHaveProperty('seed_snapshot_id');
        expect((await orch('env', 'rm', restored.id)).code).toBe(0);
      }

      const listed = await orch('snapshot', 'list', '--env', created.id);
      expect(listed.stdout.split('\n').filter((l) => l.startsWith('snap_'))).toHaveLength(2);
      expect((await orch('env', 'list')).stdout).toContain(created.id);

      // Delete everything: snapshots gone from orchd and the agent, VM gone, capacity free.
      for (const snap of [disk, live])
        expect((await orch('snapshot', 'rm', snap.id)).stdout).toBe(`deleted ${snap.id}\n`);
      expect(agent.snapshots.size).toBe(0);
      const rm = JSON.parse((await orch('-o', 'json', 'env', 'rm', created.id)).stdout) as Environment;
      expect(rm.state).toBe('stopped');
      expect(agent.vms.has(created.id)).toBe(false);
      const again = await orchd.request('DELETE', `/v1/environments/${created.id}`, as);
      expect((again.body as Environment).state).toBe('stopped');
      // A hang guard, not a speed bound: the whole path took 88-103 s in a loaded run.
    }, 240_000);
  });

  describe('snapshot reads conform to the spec', () => {
    test('an unknown id is 404 not_found', async () => {
      const r = await orchd.request('GET', '/v1/snapshots/snap_nope', as);
      expect(r.status).toBe(404);
      expect(r.body).toEqual({
        error: { code: 'not_found', message: 'snapshot "snap_nope" not found', details: { id: 'snap_nope' } },
      });
    });

    test('a live request served by an agent that can only take disks reads back kind disk; optional fields are omitted', async () => {
      const e = await createEnv();
      agent.supportsLive = false;
      try {
        const r = await orchd.request('POST', `/v1/environments/${e.id}/snapshots`, {
          ...as,
          body: { live: true, mode: '', export_destination: 'file:///x', export_status: '' },
        });
        expect(r.status).toBe(201);
        const s = r.body as Snapshot;
        expect(s.kind).toBe('disk');
        expect(s.mode).toBe('manual');
        expect(s.exports?.[0]?.status).toBe('pending');
        expect(Object.keys(s).sort()).toEqual(
          [
            'arch',
            'created_at',
            'digest',
            'exports',
            'id',
            'kind',
            'mode',
            'retention_until',
            'size_bytes',
            'state',
            'task_id',
            'updated_at',
            'vm_id',
          ].sort(),
        );
        expect(s.retention_until).toBeNull();
        // The export runs on: by the time of the read it may have finished (export_ref, its status,
        // updated_at); everything else reads back as created.
        const read = (await orchd.request('GET', `/v1/snapshots/${s.id}`, as)).body as Snapshot;
        const settled = ({ exports, export_ref, updated_at, ...rest }: Snapshot) => rest;
        expect(settled(read)).toEqual(settled(s));
        expect(read.exports?.map((x) => x.destination)).toEqual(['file:///x']);
      } finally {
        agent.supportsLive = true;
        await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
      }
    });

    test('snapshots past retention_until are garbage-collected', async () => {
      const e = await createEnv();
      const r = await orchd.request('POST', `/v1/environments/${e.id}/snapshots`, {
        ...as,
        body: { retention_until: new Date(Date.now() + 1500).toISOString() },
      });
      const id = (r.body as Snapshot).id;
      expect(agent.snapshots.has(id)).toBe(true);
      await expect
        .poll(async () => (await orchd.request('GET', `/v1/snapshots/${id}`, as)).status, { timeout: 15_000 })
        .toBe(404);
      expect(agent.snapshots.has(id)).toBe(false);
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    // Only the server store can be stopped from outside.
    if (store === 'server') {
      test('a store failure on GET /v1/snapshots/{id} is 404, never 500', async () => {
        await pg!.halt();
        try {
          const r = await orchd.request('GET', '/v1/snapshots/snap_any', as);
          expect(r.status).toBe(404);
          expect(r.body).toMatchObject({ error: { code: 'not_found' } });
        } finally {
          await pg!.resume();
        }
        await expect
          .poll(async () => (await orchd.request('GET', '/v1/environments', as)).status, { timeout: 30_000 })
          .toBe(200);
      });
    }
  });

  describe('placement, failures and reconciliation', () => {
    test('what no host could ever run is invalid_argument; a full or cordoned fleet is unavailable', async () => {
      const big = await orchd.request('POST', '/v1/environments', { ...as, body: request({ cpus: 64 }) });
      expect(big.status).toBe(400);
      expect(big.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining('64 cpus') },
      });
      await orchd.request('POST', '/v1/hosts/h1?action=cordon', as);
      try {
        const busy = await orchd.request('POST', '/v1/environments', { ...as, body: request() });
        expect(busy.status).toBe(503);
        expect(busy.body).toMatchObject({
          error: { code: 'unavailable', message: expect.stringContaining('h1: cordoned') },
        });
      } finally {
        await orchd.request('POST', '/v1/hosts/h1?action=uncordon', as);
      }
    });

    test('a missing secret value is refused before anything is placed', async () => {
      const body = {
        ...request(),
        manifest_inline: Buffer.from(
          JSON.stringify({
            version: '1',
            machine: { workspace: '/w' },
            services: { db: { image: 'pg', ports: [], env: { P: { secret: 'pw' } } } },
          }),
        ).toString('base64'),
      };
      const r = await orchd.request('POST', '/v1/environments', { ...as, body });
      expect(r.body).toMatchObject({
        error: {
          code: 'invalid_argument',
          message: "secrets missing for the manifest's secret references: pw",
        },
      });
    });

    test('the compiled body is validated: unknown fields and bad values name the field', async () => {
      const r = await orchd.request('POST', '/v1/environments', {
        ...as,
        body: { ...request(), colour: 'blue' },
      });
      expect(r.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringContaining('colour') },
      });
      const r2 = await orchd.request('POST', '/v1/environments', { ...as, body: request({ cpus: 0 }) });
      expect(r2.body).toMatchObject({
        error: { code: 'invalid_argument', message: expect.stringMatching(/^spec\.cpus: Too small/) },
      });
    });

    const manifest = (m: object) =>
      Buffer.from(
        JSON.stringify({ version: '1', machine: { workspace: '/workspace' }, services: {}, ...m }),
      ).toString('base64');
    const withPw = { db: { image: 'debian-12', env: { P: { secret: 'pw' } } } };
    test.each<[string, (body: ReturnType<typeof request>) => object, string]>([
      [
        'an unknown field inside spec',
        (b) => ({ ...b, spec: { ...b.spec, x: 1 } }),
        'spec: Unrecognized key: "x"',
      ],
      [
        'an unknown field inside spec.gpu',
        (b) => ({ ...b, spec: { ...b.spec, gpu: { model: 'h100', count: 1, y: 1 } } }),
        'spec.gpu: Unrecognized key: "y"',
      ],
      [
        'a manifest version other than "1"',
        (b) => ({ ...b, manifest_inline: manifest({ version: '2' }) }),
        'manifest_inline: version: must be "1", the only manifest version',
      ],
      [
        'an env entry with both value and secret',
        (b) => ({
          ...b,
          manifest_inline: manifest({
            services: { db: { image: 'pg', env: { P: { value: 'v', secret: 'pw' } } } },
          }),
          secrets: { pw: 'x' },
        }),
        'manifest_inline: services.db.env.P: sets both value and secret: keep one',
      ],
      [
        'a manifest in base64 with line breaks (as `base64` wraps it)',
        (b) => ({ ...b, manifest_inline: manifest({ services: withPw }).replace(/.{76}/, '$&\n') }),
        'manifest_inline: must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =): it has a line break at character 77 (no whitespace is accepted)',
      ],
      [
        'a manifest in base64 followed by garbage (which Node would skip)',
        (b) => ({ ...b, manifest_inline: 'e30=!!' }),
        'manifest_inline: must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =): it has "!" at character 5, outside the alphabet',
      ],
      [
        'a manifest in base64url',
        (b) => ({ ...b, manifest_inline: 'eyJ2ZXJzaW9uIjoiMSIsIngiOiI-Pj4_In0' }),
        'manifest_inline: must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =): it has "-" at character 28: that is base64url, not base64',
      ],
      [
        'a service name the definition file could not have',
        (b) => ({ ...b, manifest_inline: manifest({ services: { Web: { image: 'debian-12' } } }) }),
        'manifest_inline: services.Web: must be 1-63 lower-case letters, digits, "_" or "-", starting with a letter',
      ],
      [
        'a relative workspace',
        (b) => ({ ...b, manifest_inline: manifest({ machine: { workspace: '../..' } }) }),
        'manifest_inline: machine.workspace: must be an absolute guest path (starting with "/")',
      ],
      [
        'a repeated expose name',
        (b) => ({
          ...b,
          expose: [
            { port: 80, as: 'web' },
            { port: 81, as: 'web' },
          ],
        }),
        'expose.1.as: "web" is already the name of expose[0]; names must be unique',
      ],
      [
        'a secret name outside the rule',
        (b) => ({ ...b, manifest_inline: manifest({ services: withPw }), secrets: { pw: 'x', 'a b': 'x' } }),
        'secrets.a b: must be a secret name: letters, digits and "_", starting with a letter or "_", at most 128, not "__proto__" or "ORCH_VM_SECRET"',
      ],
      [
        'a task id with a control character',
        (b) => ({ ...b, task_id: 'a\nb' }),
        'task_id: must not contain control characters',
      ],
    ])(
      '%s is 400 invalid_argument naming the field, and nothing is created',
      async (_what, change, message) => {
        const before = agent.created.length;
        const r = await orchd.request('POST', '/v1/environments', { ...as, body: change(request()) });
        expect(r.status, JSON.stringify(r.body)).toBe(400);
        expect(r.body).toMatchObject({ error: { code: 'invalid_argument', message } });
        expect(agent.created.length).toBe(before);
      },
    );

    test('only the secrets the manifest references are kept', async () => {
      const r = await orchd.request('POST', '/v1/environments', {
        ...as,
        body: {
          ...request(),
          manifest_inline: manifest({ services: withPw }),
          secrets: { pw: 'x', extra: 'y' },
        },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      const e = r.body as Environment;
      expect(e.secret_names).toEqual(['pw']);
      expect(Object.keys(agent.created.find((c) => c.id === e.id)!.secrets).sort()).toEqual([
        'ORCH_VM_SECRET',
        'pw',
      ]);
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    test('exec refuses stdin that is not base64', async () => {
      const e = await createEnv();
      const r = await orchd.request('POST', `/v1/environments/${e.id}?action=exec`, {
        ...as,
        body: { argv: ['id'], stdin_base64: '!!!' },
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({
        error: {
          code: 'invalid_argument',
          message:
            'stdin_base64: must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =): it has "!" at character 1, outside the alphabet',
        },
      });
      const ok = await orchd.request('POST', `/v1/environments/${e.id}?action=exec`, {
        ...as,
        body: { argv: ['cat'], stdin_base64: Buffer.from('hi').toString('base64') },
      });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    test('an agent whose stored token is wrong surfaces as http 401 and the environment is error', async () => {
      agent.token = 'rotated';
      try {
        const r = await orchd.request('POST', '/v1/environments', { ...as, body: request() });
        expect(r.status).toBe(503);
        expect(r.body).toMatchObject({
          error: { code: 'unavailable', message: expect.stringContaining('http 401') },
        });
        const errored = (
          (await orchd.request('GET', '/v1/environments?state=error', as)).body as {
            environments: Environment[];
          }
        ).environments;
        expect(errored[0]?.last_error).toContain('http 401');
      } finally {
        agent.token = AGENT_TOKEN;
      }
    });

    test('an agent that hangs mid-create leaves the environment in error with its capacity released', async () => {
      agent.hangCreate = true;
      try {
        const r = await orchd.request('POST', '/v1/environments', { ...as, body: request({ cpus: 8 }) });
        expect(r.status).toBe(503);
        expect(r.body).toMatchObject({
          error: { code: 'unavailable', message: expect.stringContaining('no answer within 3000 ms') },
        });
      } finally {
        agent.hangCreate = false;
      }
      // All 8 cpus are free again: a second 8-cpu environment fits.
      const e = await createEnv({ cpus: 8 });
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    test('max_runtime_seconds stops the environment', async () => {
      const e = await createEnv({ max_runtime_seconds: 1 });
      await expect.poll(async () => (await getEnv(e.id)).state, { timeout: 15_000 }).toBe('stopped');
      expect((await getEnv(e.id)).last_error).toBe('max_runtime_seconds ran out');
      expect(agent.vms.has(e.id)).toBe(false);
    });

    test('reconciler rounds leave an unchanged running environment untouched (ports compared by value)', async () => {
      const r = await orchd.request('POST', '/v1/environments', {
        ...as,
        body: { ...request(), expose: [{ port: 8080, as: 'web' }] },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      const id = (r.body as Environment).id;
      await expect.poll(async () => (await getEnv(id)).state, { timeout: 15_000 }).toBe('running');
      const before = await getEnv(id);
      expect(before.ports).toHaveLength(1);
      // Three reconciler rounds (every second here) see the same ports and expiry from the agent.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      const after = await getEnv(id);
      expect(after.updated_at).toBe(before.updated_at);
      expect(after.ports).toEqual(before.ports);
      await orchd.request('DELETE', `/v1/environments/${id}`, as);
    });

    test('a host with running environments cannot be removed', async () => {
      const e = await createEnv();
      const r = await orchd.request('DELETE', '/v1/hosts/h1', as);
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ error: { code: 'conflict' } });
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    test('after an orchd restart, records and agents are reconciled: a vanished VM is error, an orphan is deleted', async () => {
      const kept = await createEnv();
      const vanishing = await createEnv();
      expect(await orchd.stop()).toBe(0);
      agent.vms.delete(vanishing.id);
      const orphan = { ...agent.vms.get(kept.id)!, id: 'env_orphan' };
      agent.vms.set(orphan.id, orphan);
      orchd = await OrchdProcess.start(env);
      await expect.poll(async () => (await getEnv(vanishing.id)).state, { timeout: 15_000 }).toBe('error');
      expect((await getEnv(vanishing.id)).last_error).toBe('the VM is gone from its host');
      await expect.poll(() => agent.vms.has('env_orphan'), { timeout: 15_000 }).toBe(false);
      expect((await getEnv(kept.id)).state).toBe('running');
      await orchd.request('DELETE', `/v1/environments/${kept.id}`, as);
    });
  });

  describe('attach', () => {
    test('the console is proxied over WebSocket to the agent (master only)', async () => {
      const e = await createEnv();
      const url = `${orchd.url.replace('http', 'ws')}/v1/environments/${e.id}/attach`;
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${MASTER}` } });
      await new Promise((r, j) => ws.once('open', r).once('error', j));
      const answer = new Promise<string>((r) => ws.once('message', (d: Buffer) => r(d.toString())));
      ws.send(Buffer.from('ls -l\n'));
      expect(await answer).toBe('LS -L\n');
      ws.close();
      const refused = await new Promise<number>((r) => {
        const bad = new WebSocket(url, { headers: { authorization: 'Bearer nope' } });
        bad.once('unexpected-response', (_q, res) => r(res.statusCode ?? 0));
        bad.once('error', () => undefined);
      });
      expect(refused).toBe(401);
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });

    test('a session-cookie upgrade from another origin is refused like any cross-site request; same-origin and bearer attach', async () => {
      const e = await createEnv();
      const url = `${orchd.url.replace('http', 'ws')}/v1/environments/${e.id}/attach`;
      const login = await orchd.request('POST', '/login', { body: { token: MASTER } });
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      /** Opens the console with `headers`: 'open' (and the console echoes), or the refusal. */
      const attach = (headers: Record<string, string>) =>
        new Promise<string>((resolve) => {
          const ws = new WebSocket(url, { headers });
          ws.once('open', () => {
            ws.once('message', (d: Buffer) => {
              resolve(`open ${d.toString()}`);
              ws.close();
            });
            ws.send(Buffer.from('hi\n'));
          });
          ws.once('unexpected-response', (_q, res) => {
            let body = '';
            res.on('data', (d: Buffer) => (body += d.toString()));
            res.on('end', () => resolve(`${res.statusCode} ${body}`));
          });
          ws.once('error', () => undefined);
        });
      const refusal = (message: string) =>
        `403 ${JSON.stringify({ error: { code: 'unauthorized', message } })}`;

      expect(await attach({ cookie, origin: 'http://evil.example:4444' })).toBe(
        refusal('cross-origin request from http://evil.example:4444 refused'),
      );
      // Same host, another port: same-site, so SameSite=Lax lets the cookie through; refused here.
      const otherPort = new URL(orchd.url);
      otherPort.port = String(Number(otherPort.port) + 1);
      expect(await attach({ cookie, origin: otherPort.origin })).toBe(
        refusal(`cross-origin request from ${otherPort.origin} refused`),
      );
      expect(await attach({ cookie, 'sec-fetch-site': 'same-site' })).toBe(
        refusal('cross-site request refused (Sec-Fetch-Site: same-site)'),
      );
      // The dashboard's own page: same origin.
      expect(
        await attach({ cookie, origin: new URL(orchd.url).origin, 'sec-fetch-site': 'same-origin' }),
      ).toBe('open HI\n');
      // A bearer token is not a browser session (the CLI): no such rule.
      expect(await attach({ authorization: `Bearer ${MASTER}`, origin: 'http://evil.example:4444' })).toBe(
        'open HI\n',
      );
      await orchd.request('DELETE', `/v1/environments/${e.id}`, as);
    });
  });

  function request(spec: Partial<Environment['spec']> = {}) {
    return {
      task_id: 't1',
      spec: { cpus: 1, ram_mb: 512, storage_gb: 1, max_runtime_seconds: 3600, ...spec },
      manifest_inline: Buffer.from(
        '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
      ).toString('base64'),
      secrets: {},
      startup_script: '#!/bin/sh\nset -eu\ncd /workspace\n',
      expose: [],
    };
  }

  async function createEnv(spec: Partial<Environment['spec']> = {}): Promise<Environment> {
    const r = await orchd.request('POST', '/v1/environments', { ...as, body: request(spec) });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const id = (r.body as Environment).id;
    await expect.poll(async () => (await getEnv(id)).state, { timeout: 15_000 }).toBe('running');
    return getEnv(id);
  }
});
