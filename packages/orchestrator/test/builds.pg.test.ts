import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Build, Environment, Snapshot } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { createParser } from 'eventsource-parser';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { buildThenRunSteps, masked } from './readme-flow.js';
import { orchCli } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;
const DIGEST = `sha256:${'ab'.repeat(32)}`;

/** A build request as `orch build` posts it. */
const request = (setup: string[], extra: Record<string, unknown> = {}) => ({
  task_id: 'b',
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 600 },
  workspace: '/workspace',
  setup,
  secrets: {},
  ...extra,
});

/**
 * The builds API against a test agent (the real VM path is builds.vm.test.ts): refusals in the
 * error envelope, cache hits without any agent call, build events, and the GC rule for layers.
 */
describeStore('server')('builds on the server store', () => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  let databaseUrl: string;
  const as = { token: MASTER };
  const post = (body: unknown) => orchd.request('POST', '/v1/builds', { ...as, body });
  const until = async (id: string, state: string) => {
    for (let i = 0; i < 1200; i++) {
      const b = (await orchd.request('GET', `/v1/builds/${id}`, as)).body as Build;
      if (b.state === state) return b;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`build ${id} never ${state}`);
  };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const store = await openStore('server');
    databaseUrl = store.databaseUrl!;
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(store, await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
      // A hung agent call fails after 10 s, not the default 30: long enough for the reconciler
      // rounds a running build is watched through (3.5 s), short enough not to wait idle.
      ORCH_AGENT_TIMEOUT_SEC: '10',
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN, {
      images: ['busybox', 'debian-12'],
      image_details: [
        { name: 'busybox', size_bytes: 1 << 20, digest: DIGEST, source: 'busybox', created_at: '' },
        {
          name: 'debian-12',
          size_bytes: 1 << 30,
          digest: `sha256:${'cd'.repeat(32)}`,
          source: 'mmdebstrap:bookworm',
          created_at: '',
        },
      ],
    });
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
    rmSync(config, { recursive: true, force: true });
  });
  const config = mkdtempSync(join(tmpdir(), 'orch-builds-cli-'));
  const orch = (...args: string[]) => orchCli(config, ...args);

  describe('refusals are precise and in the envelope', () => {
    test.each([
      ['no setup lines', request([]), 'setup'],
      ['an unknown field', { ...request(['true']), cache: false }, 'cache'],
      ['a relative workspace', request(['true'], { workspace: 'ws' }), 'workspace'],
      ['a bad secret name', request(['true'], { secrets: { 'a b': 'x' } }), 'secrets'],
      [
        'a GPU',
        request(['true'], { spec: { ...request([]).spec, gpu: { model: 'h100', count: 1 } } }),
        'gpu',
      ],
      ['an image no host has', request(['true'], { spec: { ...request([]).spec, image: 'nope' } }), 'nope'],
    ])('%s: 400 invalid_argument', async (_what, body, names) => {
      const r = await post(body);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ error: { code: 'invalid_argument' } });
      expect((r.body as { error: { message: string } }).error.message).toContain(names);
    });

    test('an unknown build id and a malformed one: 404 not_found', async () => {
      for (const id of ['bld_unknown', '..%2Fx']) {
        const r = await orchd.request('GET', `/v1/builds/${id}`, as);
        expect(r.status).toBe(404);
        expect(r.body).toMatchObject({ error: { code: 'not_found' } });
      }
    });

    test('without credentials: 401', async () => {
      expect((await orchd.request('POST', '/v1/builds', { body: request(['true']) })).status).toBe(401);
    });
  });

  test('a build, then the same build: all cached, no agent call; events for the build', async () => {
    const events: { event: string; data: Record<string, unknown> }[] = [];
    const ctl = new AbortController();
    const parser = createParser({
      onEvent: (m) => events.push({ event: m.event ?? 'message', data: JSON.parse(m.data) }),
    });
    const res = await fetch(`${orchd.url}/v1/events`, {
      headers: { authorization: `Bearer ${MASTER}` },
      signal: ctl.signal,
    });
    const reading = (async () => {
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(dec.decode(value, { stream: true }));
        }
      } catch {
        // aborted
      }
    })();

    const created = await post(request(['apk add x', 'echo hi']));
    expect(created.status).toBe(201);
    const started = created.body as Build;
    expect(started).toMatchObject({
      state: 'running',
      base_image: 'busybox',
      base_digest: DIGEST,
      arch: 'amd64',
    });
    const built = await until(started.id, 'ready');
    expect(built.steps.map((s) => s.state)).toEqual(['built', 'built']);
    const layer = (await orchd.request('GET', `/v1/snapshots/${built.artifact_snapshot_id}`, as))
      .body as Snapshot;
    expect(layer.layer_key).toBe(built.steps[1]!.layer_key);

    // The build VM is deleted after the build is ready; wait for that, then count what the cached
    // build sends. The reconciler's polls (`GET /v1/info`, `GET /v1/vms`) go on meanwhile.
    for (let i = 0; i < 200 && agent.vms.size > 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(agent.vms.size).toBe(0);
    const since = agent.requestIds.length;
    const cached = (await post(request(['apk add x', 'echo hi']))).body as Build;
    expect(cached).toMatchObject({
      state: 'ready',
      vm_id: null,
      artifact_snapshot_id: built.artifact_snapshot_id,
    });
    expect(cached.steps.map((s) => s.state)).toEqual(['cached', 'cached']);
    // Besides the polls, a reconciler round that listed the first build's VM just before it was
    // deleted may delete it again as an orphan (answered 404): cleanup of that build, not a call of
    // this one (seen once in a loaded full run).
    const polls = new Set(['GET /v1/info', 'GET /v1/vms', `DELETE /v1/vms/${built.vm_id}`]);
    expect(agent.requestIds.slice(since).filter((r) => !polls.has(`${r.method} ${r.path}`))).toEqual([]);

    for (
      let i = 0;
      i < 200 && !events.some((e) => e.event === 'build.updated' && e.data.id === cached.id);
      i++
    )
      await new Promise((r) => setTimeout(r, 50));
    ctl.abort();
    await reading;
    const ofFirst = events.filter((e) => e.data.id === started.id);
    expect(ofFirst[0]).toMatchObject({ event: 'build.created', data: { state: 'running', task_id: 'b' } });
    expect(ofFirst.at(-1)).toMatchObject({
      event: 'build.updated',
      data: { state: 'ready', previous_state: 'running', artifact_snapshot_id: built.artifact_snapshot_id },
    });
    // One event per finished step (progress) on the way.
    expect(ofFirst.filter((e) => e.event === 'build.updated').map((e) => e.data.progress)).toContain(1);
  });

  test('layers on debian-12: a partly cached build and from-build send the agent the layer alone; the record keeps the image; another image is 400', async () => {
    const debian = (setup: string[]) =>
      request(setup, { task_id: 'deb', spec: { ...request([]).spec, image: 'debian-12' } });
    const first = await until(((await post(debian(['echo one']))).body as Build).id, 'ready');
    expect(first.base_image).toBe('debian-12');
    // Line 1 cached: the build VM boots from its layer, not from the image.
    const second = await until(((await post(debian(['echo one', 'echo two']))).body as Build).id, 'ready');
    expect(second.steps.map((s) => s.state)).toEqual(['cached', 'built']);
    const buildVm = agent.created.find((c) => c.id === second.vm_id)!;
    expect(buildVm.seed_snapshot_id).toBe(first.artifact_snapshot_id);
    expect(buildVm.spec).not.toHaveProperty('image');
    const layer = second.artifact_snapshot_id!;

    const seeded = (spec: Record<string, unknown>) =>
      orchd.request('POST', '/v1/environments', {
        ...as,
        body: {
          task_id: 'deb',
          spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 600, ...spec },
          manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
          startup_script: '#!/bin/sh\n',
          seed_snapshot_id: layer,
        },
      });
    // The image the layer was built on, or none: accepted; the record says debian-12 either way.
    for (const spec of [{ image: 'debian-12' }, {}]) {
      const r = await seeded(spec);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      const env = r.body as Environment;
      expect(env).toMatchObject({ seed_snapshot_id: layer, spec: { image: 'debian-12' } });
      const sent = agent.created.find((c) => c.id === env.id)!;
      expect(sent.seed_snapshot_id).toBe(layer);
      expect(sent.spec).not.toHaveProperty('image');
      expect((await orchd.request('DELETE', `/v1/environments/${env.id}`, as)).status).toBe(200);
    }
    // Another image: refused before anything is placed, naming both.
    const before = agent.created.length;
    const envsBefore = (
      (await orchd.request('GET', '/v1/environments', as)).body as { environments: unknown[] }
    ).environments.length;
    const wrong = await seeded({ image: 'busybox' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({
      error: {
        code: 'invalid_argument',
        message: `spec.image "busybox" is not the image build layer ${layer} was built on ("debian-12"): its disk is the root filesystem; set spec.image to "debian-12" or leave it out`,
        details: { field: 'spec.image' },
      },
    });
    expect(agent.created.length).toBe(before);
    expect(
      ((await orchd.request('GET', '/v1/environments', as)).body as { environments: unknown[] }).environments,
    ).toHaveLength(envsBefore);
  });

  test("the CLI README's build-then-run example: orch build, then the command it prints", async () => {
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
    const [build, up] = buildThenRunSteps();
    expect(build!.argv.slice(0, 2)).toEqual(['orch', 'build']);
    const built = await orch(...build!.argv.slice(1));
    expect(built.stderr).toBe('');
    expect(built.code).toBe(0);
    expect(masked(built.stdout)).toBe(masked(build!.output));
    // The printed command is the README's next one, and it works: it is not refused for `image`.
    const runIt = /^run it: (.+)$/m.exec(built.stdout)![1]!;
    expect(runIt).toMatch(/ --image-is-base examples\/build$/);
    expect(masked(runIt)).toBe(masked(up!.argv.join(' ')));
    const ran = await orch(...runIt.split(' ').slice(1));
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    expect(masked(ran.stdout)).toBe(masked(up!.output));
    const envId = /^(env_\S+)/.exec(ran.stdout)![1]!;
    const env = (await orchd.request('GET', `/v1/environments/${envId}`, as)).body as Environment;
    expect(env).toMatchObject({ spec: { image: 'debian-12' }, seed_snapshot_id: runIt.split(' ')[3] });
    expect(agent.created.find((c) => c.id === envId)!.spec).not.toHaveProperty('image');
    expect((await orch('env', 'rm', envId)).code).toBe(0);
  }, 180_000); // six CLI start-ups and a build followed every 500 ms

  test('GC never deletes an expired layer while a from-build environment uses it', async () => {
    const built = await until(((await post(request(['echo gc']))).body as Build).id, 'ready');
    const layer = built.artifact_snapshot_id!;
    const env = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: 'gc',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 600 },
        manifest_inline: Buffer.from('{"version":"1","machine":{"workspace":"/w"},"services":{}}').toString(
          'base64',
        ),
        startup_script: '#!/bin/sh\n',
        seed_snapshot_id: layer,
      },
    });
    expect(env.status).toBe(201);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query(`UPDATE snapshots SET retention_until = now() - interval '1 day' WHERE id = $1`, [
        layer,
      ]);
      // Several reconciler rounds (1 s) pass: the layer stays.
      await new Promise((r) => setTimeout(r, 3500));
      expect((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status).toBe(200);
      const envId = (env.body as Environment).id;
      expect((await orchd.request('DELETE', `/v1/environments/${envId}`, as)).status).toBe(200);
      // Unused now: collected.
      for (let i = 0; i < 100; i++) {
        if ((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status === 404) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status).toBe(404);
    } finally {
      await db.end();
    }
  });

  test('GC never deletes an expired layer a running build uses', async () => {
    const base = await until(((await post(request(['echo base']))).body as Build).id, 'ready');
    const layer = base.artifact_snapshot_id!;
    agent.hangCreate = true; // the build VM never comes: the build stays running
    let running: Build;
    try {
      running = (await post(request(['echo base', 'echo more']))).body as Build;
      expect(running.steps.map((s) => s.state)).toEqual(['cached', 'pending']);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      try {
        await db.query(`UPDATE snapshots SET retention_until = now() - interval '1 day' WHERE id = $1`, [
          layer,
        ]);
      } finally {
        await db.end();
      }
      // Several reconciler rounds (1 s) pass while the build still runs: the layer stays.
      await new Promise((r) => setTimeout(r, 3500));
      expect(((await orchd.request('GET', `/v1/builds/${running.id}`, as)).body as Build).state).toBe(
        'running',
      );
      expect((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status).toBe(200);
    } finally {
      agent.hangCreate = false;
    }
    // The agent call times out (ORCH_AGENT_TIMEOUT_SEC): the build fails, the layer is no longer in use and goes.
    const failed = await until(running.id, 'failed');
    expect(failed.last_error).toContain('no answer');
    for (let i = 0; i < 100; i++) {
      if ((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status === 404) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await orchd.request('GET', `/v1/snapshots/${layer}`, as)).status).toBe(404);
  }, 120_000);

  test('an expired layer is no cache hit: the line is built again', async () => {
    const built = await until(((await post(request(['echo expired']))).body as Build).id, 'ready');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      // Past retention but not collected yet (the reconciler deletes it soon): never a hit.
      await db.query(`UPDATE snapshots SET retention_until = now() - interval '1 second' WHERE id = $1`, [
        built.artifact_snapshot_id,
      ]);
    } finally {
      await db.end();
    }
    const again = await until(((await post(request(['echo expired']))).body as Build).id, 'ready');
    expect(again.steps[0]).toMatchObject({ state: 'built', layer_key: built.steps[0]!.layer_key });
    expect(again.artifact_snapshot_id).not.toBe(built.artifact_snapshot_id);
  });
});
