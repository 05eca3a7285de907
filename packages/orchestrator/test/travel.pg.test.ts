import { randomBytes } from 'node:crypto';
import type { Environment, HostDrain, Snapshot } from '@orch/protocol';
import { describeStores, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * The API of exports and drains against an agent double (the real transfers run in
 * travel.vm.test.ts): an export's status goes from the caller's verbatim value (or `pending`) to
 * the exporter's `ready` with `export_ref`, or `error` with `last_error`; bad destinations and
 * unknown snapshots get precise errors, never a 500; a drain with nowhere to go cordons the host
 * and lists each running environment with why; drain is master-only.
 */
describeStores('exports and drain on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  type Err = { error: { code: string; message: string } };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  const snapshotOf = async (): Promise<{ env: Environment; snap: Snapshot }> => {
    const created = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 't',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
        manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
        startup_script: 'true\n',
      },
    });
    const env = created.body as Environment;
    await expect
      .poll(
        async () =>
          ((await orchd.request('GET', `/v1/environments/${env.id}`, as)).body as Environment).state,
      )
      .toBe('running');
    const r = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
      ...as,
      body: { export_destination: 'file:///srv/exports', export_status: 'queued?' },
    });
    expect(r.status).toBe(201);
    return { env, snap: r.body as Snapshot };
  };
  const exportsOf = async (id: string) =>
    ((await orchd.request('GET', `/v1/snapshots/${id}`, as)).body as Snapshot).exports ?? [];

  test('export status: verbatim at create, then ready with export_ref; later exports; failures', async () => {
    const { snap } = await snapshotOf();
    expect(snap.exports).toMatchObject([{ destination: 'file:///srv/exports', status: 'queued?' }]);
    await expect.poll(async () => (await exportsOf(snap.id))[0]?.status).toBe('ready');
    expect(((await orchd.request('GET', `/v1/snapshots/${snap.id}`, as)).body as Snapshot).export_ref).toBe(
      `file:///srv/exports/${snap.id}`,
    );

    const later = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
      ...as,
      body: { destination: 's3://orch-bucket/team' },
    });
    expect(later.status).toBe(201);
    expect((later.body as Snapshot).exports?.[1]).toMatchObject({
      destination: 's3://orch-bucket/team',
      status: 'pending',
    });
    await expect.poll(async () => (await exportsOf(snap.id))[1]?.status).toBe('ready');

    agent.exportFailure = 'no space left on device';
    try {
      await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...as,
        body: { destination: 'file:///full' },
      });
      await expect.poll(async () => (await exportsOf(snap.id))[2]?.status).toBe('error');
      expect((await exportsOf(snap.id))[2]?.last_error).toMatch(/no space left on device/);
    } finally {
      agent.exportFailure = undefined;
    }
  });

  test('one directory is one destination whichever route names it (normal form)', async () => {
    const { env } = await snapshotOf();
    const created = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
      ...as,
      body: { export_destination: 'file:///srv/exports//same/' },
    });
    expect(created.status).toBe(201);
    const snap = created.body as Snapshot;
    expect(snap.exports?.map((e) => e.destination)).toEqual(['file:///srv/exports/same']);
    const later = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
      ...as,
      body: { destination: 'file:///srv/exports/same' },
    });
    expect(later.status).toBe(201);
    expect(new Set((later.body as Snapshot).exports?.map((e) => e.destination))).toEqual(
      new Set(['file:///srv/exports/same']),
    );
    await expect
      .poll(async () => (await exportsOf(snap.id)).map((e) => e.status))
      .toEqual(['ready', 'ready']);
    expect(((await orchd.request('GET', `/v1/snapshots/${snap.id}`, as)).body as Snapshot).export_ref).toBe(
      `file:///srv/exports/same/${snap.id}`,
    );
  });

  test("who may export: master, API key and session; outside the agent's roots is a 400 at the request", async () => {
    const { env, snap } = await snapshotOf();
    const login = await orchd.request('POST', '/login', { body: { token: MASTER } });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    expect(cookie).toMatch(/^orch_session=/);
    const principals: [string, { token?: string; cookie?: string; headers?: Record<string, string> }][] = [
      ['master', as],
      ['session', { cookie, headers: { origin: orchd.url, 'sec-fetch-site': 'same-origin' } }],
    ];
    if (store === 'server') {
      const key = await orchd.request('POST', '/v1/api-keys', { ...as, body: { label: 'exports' } });
      principals.push(['api key', { token: (key.body as { secret: string }).secret }]);
    }
    for (const [who, cred] of principals) {
      const before = (await exportsOf(snap.id)).length;
      const ok = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...cred,
        body: { destination: 'file:///srv/by-principal' },
      });
      expect(ok.status, who).toBe(201);
      expect((await exportsOf(snap.id)).length, who).toBe(before + 1);
      // Outside the agent's export roots: the agent's refusal, at the request, nothing recorded.
      for (const destination of ['file:///etc/orch-probe', 'file:///root/x', 'file:///srv-evil']) {
        const no = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
          ...cred,
          body: { destination },
        });
        expect(no.status, `${who} ${destination}`).toBe(400);
        expect(no.body, `${who} ${destination}`).toMatchObject({
          error: {
            code: 'invalid_argument',
            message: expect.stringContaining(`${destination} is not under an export root`),
            details: { reason: 'outside_export_roots' },
          },
        });
        const at = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
          ...cred,
          body: { export_destination: destination },
        });
        expect(at.status, `${who} create ${destination}`).toBe(400);
      }
      expect((await exportsOf(snap.id)).length, who).toBe(before + 1);
    }
    // Nobody: 401, nothing recorded.
    const before = (await exportsOf(snap.id)).length;
    const none = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
      body: { destination: 'file:///srv/none' },
    });
    expect(none.status).toBe(401);
    expect((await exportsOf(snap.id)).length).toBe(before);
    // The refused creates took no snapshot.
    const { snapshots } = (await orchd.request('GET', `/v1/snapshots?vm_id=${env.id}`, as)).body as {
      snapshots: Snapshot[];
    };
    expect(snapshots.map((s) => s.id)).toEqual([snap.id]);
  });

  test('bad destinations and unknown snapshots: precise errors in the envelope, never a 500', async () => {
    const { env, snap } = await snapshotOf();
    for (const destination of [
      'http://x/y',
      'file://host/x',
      'file:///a/../b',
      's3://B/x',
      's3://u:p@bucket/x',
      '',
    ]) {
      const r = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...as,
        body: { destination },
      });
      expect(r.status, destination).toBe(400);
      expect((r.body as Err).error.code).toBe('invalid_argument');
      const c = await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, {
        ...as,
        body: { export_destination: destination },
      });
      expect(c.status, destination).toBe(400);
    }
    // An empty userinfo, which the URL parser drops, is userinfo all the same; the message says so.
    for (const destination of ['s3://@bucket/x', 's3://:@bucket']) {
      const r = await orchd.request('POST', `/v1/snapshots/${snap.id}/exports`, {
        ...as,
        body: { destination },
      });
      expect(r.status, destination).toBe(400);
      expect(r.body, destination).toMatchObject({
        error: {
          code: 'invalid_argument',
          message:
            'destination: destination must not embed credentials (nothing before "@", not even an empty name)',
        },
      });
    }
    const unknown = await orchd.request('POST', '/v1/snapshots/snap_nope/exports', {
      ...as,
      body: { destination: 'file:///x' },
    });
    expect(unknown.status).toBe(404);
    expect((unknown.body as Err).error.code).toBe('not_found');
    const traversal = await orchd.request('POST', '/v1/snapshots/..%2Fx/exports', {
      ...as,
      body: { destination: 'file:///x' },
    });
    expect(traversal.status).toBe(404);
  });

  test('a drain with nowhere to go cordons the host and lists each environment with why', async () => {
    const r = await orchd.request('POST', '/v1/hosts/h1?action=drain', as);
    expect(r.status).toBe(200);
    const drain = r.body as HostDrain;
    expect(drain.host).toMatchObject({ id: 'h1', state: 'cordoned' });
    expect(drain.moves).toEqual([]);
    expect(drain.unmovable.length).toBeGreaterThan(0);
    for (const u of drain.unmovable)
      expect(u).toMatchObject({ state: 'running', reason: 'no other host is registered' });
    expect((await orchd.request('GET', '/v1/moves?host_id=h1', as)).body).toEqual({ moves: [] });
    expect((await orchd.request('POST', '/v1/hosts/nope?action=drain', as)).status).toBe(404);
    expect((await orchd.request('GET', '/v1/moves?host_id=bad%20id', as)).status).toBe(400);
    if (store === 'server') {
      const key = await orchd.request('POST', '/v1/api-keys', { ...as, body: { label: 'drain' } });
      const secret = (key.body as { secret: string }).secret;
      const refused = await orchd.request('POST', '/v1/hosts/h1?action=drain', { token: secret });
      expect(refused.status).toBe(403);
    }
  });

  test("a drain moves an environment only to a host that has its services' images", async () => {
    expect((await orchd.request('POST', '/v1/hosts/h1?action=uncordon', as)).status).toBe(200);
    const manifest = {
      version: '1',
      machine: { workspace: '/workspace' },
      services: { db: { image: 'postgres:16' } },
    };
    const created = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 'with-db',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
        manifest_inline: Buffer.from(JSON.stringify(manifest)).toString('base64'),
        startup_script: 'true\n',
      },
    });
    expect(created.status).toBe(201);
    const env = created.body as Environment;
    await expect
      .poll(
        async () =>
          ((await orchd.request('GET', `/v1/environments/${env.id}`, as)).body as Environment).state,
      )
      .toBe('running');
    // A second host with room but without postgres-16: the environment cannot move there.
    const other = await FakeAgent.start(AGENT_TOKEN, { images: ['debian-12'] });
    try {
      const reg = await orchd.request('POST', '/v1/hosts', {
        ...as,
        body: { id: 'h-nodb', kind: 'microvm', agent_url: other.url, agent_token: AGENT_TOKEN },
      });
      expect(reg.status).toBe(201);
      const drain = (await orchd.request('POST', '/v1/hosts/h1?action=drain', as)).body as HostDrain;
      expect(drain.moves.map((m) => m.environment_id)).not.toContain(env.id);
      expect(drain.unmovable.find((u) => u.environment_id === env.id)?.reason).toContain(
        'service "db": image "postgres:16" (image name postgres-16) is on no microvm host',
      );
    } finally {
      // Moves of the other environments (to h-nodb) are left to end with the orchd.
      await other.close();
    }
  });
});

/**
 * Cross-host restore against agent doubles (from-build seeds take the same path; seeds are build
 * layers, made by builds.pg.test.ts): with the snapshot's host cordoned the
 * scheduler places the new environment on another host the artifact is portable to, which is told
 * to fetch it from the source agent (its URL and token, the digests of the record), else from a
 * ready export; a live snapshot no other host can resume is a 409 saying why; a source that cannot
 * serve it and no export is a 503; a digest mismatch is a 409.
 */
describeStores('cross-host restore on the %s store', (store) => {
  let orchd: OrchdProcess;
  const agents: Record<string, FakeAgent> = {};
  const as = { token: MASTER };
  type Err = { error: { code: string; message: string; details?: { reason?: string } } };
  const register = async (id: string) =>
    orchd.request('POST', '/v1/hosts', {
      ...as,
      body: { id, kind: 'microvm', agent_url: agents[id]!.url, agent_token: `${AGENT_TOKEN}-${id}` },
    });
  const running = async (id: string) => {
    await expect
      .poll(
        async () => ((await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment).state,
      )
      .toBe('running');
    return (await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment;
  };
  const request = {
    task_id: 't',
    spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600, image: 'debian-12' },
    manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
    startup_script: 'true\n',
  };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
    });
    agents.h1 = await FakeAgent.start(`${AGENT_TOKEN}-h1`);
    agents.h2 = await FakeAgent.start(`${AGENT_TOKEN}-h2`, { accelerator: 'kvm' });
    // h3 has no image: the artifact it fetches is the whole root filesystem.
    agents.h3 = await FakeAgent.start(`${AGENT_TOKEN}-h3`, { images: [], image_details: [] });
    expect((await register('h1')).status).toBe(201);
  });

  afterAll(async () => {
    await orchd?.stop();
    for (const a of Object.values(agents)) await a.close();
  });

  test('restore elsewhere fetches the artifact; not portable 409; no source 503; digest 409', async () => {
    const env = (await orchd.request('POST', '/v1/environments', { ...as, body: request }))
      .body as Environment;
    await running(env.id);
    const live = (
      await orchd.request('POST', `/v1/environments/${env.id}/snapshots`, { ...as, body: { live: true } })
    ).body as Snapshot;
    expect(live.kind).toBe('live');
    for (const h of ['h2', 'h3']) expect((await register(h)).status).toBe(201);
    await orchd.request('POST', '/v1/hosts/h1?action=cordon', as);

    // Live: h2 runs kvm (not portable), so h3 takes it and fetches from h1.
    const restored = await orchd.request('POST', `/v1/snapshots/${live.id}/restore`, { ...as, body: {} });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    const copy = await running((restored.body as Environment).id);
    expect(copy.host_id).toBe('h3');
    expect(agents.h3!.fetches.at(-1)).toMatchObject({
      id: live.id,
      body: {
        digest: live.digest,
        source: {
          agent_url: agents.h1!.url,
          grant: expect.stringMatching(/^\d+\.[0-9a-f]{64}$/),
          snapshot_id: live.id,
        },
      },
    });
    // h3 got a grant for this snapshot's files on h1, never h1's token.
    expect(JSON.stringify(agents.h3!.fetches)).not.toContain(`${AGENT_TOKEN}-h1`);
    expect(agents.h3!.created.at(-1)).toMatchObject({ restore_snapshot_id: live.id });
    // The snapshot alone names the root filesystem; the new record keeps the image it descends from.
    expect(agents.h3!.created.at(-1)!.spec).not.toHaveProperty('image');
    expect(copy.spec.image).toBe('debian-12');

    // Only a kvm host left besides the cordoned source: a live snapshot is not portable, 409.
    await orchd.request('DELETE', `/v1/environments/${copy.id}`, as);
    await expect.poll(async () => (await orchd.request('DELETE', '/v1/hosts/h3', as)).status).toBe(204);
    const refused = await orchd.request('POST', `/v1/snapshots/${live.id}/restore`, { ...as, body: {} });
    expect(refused.status).toBe(409);
    expect((refused.body as Err).error).toMatchObject({
      code: 'conflict',
      details: { reason: 'not_portable' },
    });
    expect((refused.body as Err).error.message).toMatch(/h2 runs kvm; the live snapshot was taken under tcg/);

    // The source cannot serve it and there is no export: 503; with a ready export, from there.
    expect((await register('h3')).status).toBe(201);
    agents.h3!.snapshots.clear();
    agents.h3!.fetchFailures.agent = {
      status: 503,
      body: { error: { code: 'unavailable', message: 'source agent cannot be reached' } },
    };
    const noSource = await orchd.request('POST', `/v1/snapshots/${live.id}/restore`, { ...as, body: {} });
    expect(noSource.status).toBe(503);
    expect((noSource.body as Err).error.message).toMatch(/cannot be brought to host h3/);
    await orchd.request('POST', `/v1/snapshots/${live.id}/exports`, {
      ...as,
      body: { destination: 'file:///srv/x' },
    });
    await expect
      .poll(
        async () =>
          ((await orchd.request('GET', `/v1/snapshots/${live.id}`, as)).body as Snapshot).exports?.[0]
            ?.status,
      )
      .toBe('ready');
    const fromExport = await orchd.request('POST', `/v1/snapshots/${live.id}/restore`, { ...as, body: {} });
    expect(fromExport.status, JSON.stringify(fromExport.body)).toBe(201);
    expect(agents.h3!.fetches.at(-1)?.body.source).toEqual({ export_ref: `file:///srv/x/${live.id}` });
    await orchd.request('DELETE', `/v1/environments/${(fromExport.body as Environment).id}`, as);

    // A corrupted export: the target refuses it by its digest; orchd answers 409 with the reason.
    agents.h3!.snapshots.clear();
    agents.h3!.fetchFailures.export = {
      status: 409,
      body: {
        error: {
          code: 'conflict',
          message: `disk.qcow2 from file:///srv/x/${live.id} does not match its digest: refused`,
          details: { reason: 'digest_mismatch' },
        },
      },
    };
    const corrupted = await orchd.request('POST', `/v1/snapshots/${live.id}/restore`, { ...as, body: {} });
    expect(corrupted.status).toBe(409);
    expect((corrupted.body as Err).error).toMatchObject({
      code: 'conflict',
      details: { reason: 'digest_mismatch' },
    });
    expect((corrupted.body as Err).error.message).toMatch(/does not match its digest/);
  });
});
