import { randomBytes } from 'node:crypto';
import type { Environment } from '@orch/protocol';
import { describeStore, describeStores, pgTest } from '@support/pg/testing';
import pg from 'pg';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;
const as = { token: MASTER };
/** A host of the burst: 4 CPUs, so 4 creates of 1 CPU fit. */
const SMALL_HOST = {
  capacity: { cpus: 4, ram_mb: 16384, disk_gb: 200 },
  free: { cpus: 4, ram_mb: 16384, disk_gb: 200 },
};
const EMPTY_MANIFEST = Buffer.from(
  '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
).toString('base64');

/** A compiled create request of `cpus` CPUs (no services, no secrets). */
function request(task: string, cpus = 1) {
  return {
    task_id: task,
    spec: { cpus, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
    manifest_inline: EMPTY_MANIFEST,
    secrets: {},
    startup_script: '#!/bin/sh\n',
    expose: [],
  };
}

type Answer = { status: number; body: unknown; headers: Headers } | { status: 'no answer' };

/** POSTs a create; a connection that ends without an answer (a killed orchd) is `no answer`. */
async function create(orchd: OrchdProcess, task: string, key?: string, cpus = 1): Promise<Answer> {
  return orchd
    .request('POST', '/v1/environments', {
      ...as,
      body: request(task, cpus),
      ...(key ? { headers: { 'idempotency-key': key } } : {}),
    })
    .catch(() => ({ status: 'no answer' as const }));
}

async function environments(orchd: OrchdProcess, query = ''): Promise<Environment[]> {
  const r = await orchd.request('GET', `/v1/environments${query}`, as);
  expect(r.status).toBe(200);
  return (r.body as { environments: Environment[] }).environments;
}

/** Polls `check` (every 200 ms) until it returns true; the test's timeout is the hang guard. */
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 200));
}

/** Waits until this orchd's reconciler has finished `rounds` more rounds (from its metrics). */
async function reconcileRounds(orchd: OrchdProcess, rounds: number): Promise<void> {
  const count = async () => {
    const text = (await orchd.request('GET', '/metrics', as)).body as string;
    return Number(/orchd_reconciler_runs_total\{outcome="ok"\} (\d+)/.exec(text)?.[1] ?? 0);
  };
  const start = await count();
  await until(async () => (await count()) >= start + rounds);
}

/** CPU-holding states (`EnvironmentsRepo.usage`). */
const HOLDING = ['creating', 'running', 'pausing', 'resuming', 'stopping'];

/**
 * What the store and the hosts must agree on after any burst: no host holds more CPUs than it has,
 * and every VM on a host belongs to an active environment placed there (no orphan).
 */
async function expectConsistent(orchd: OrchdProcess, agents: Map<string, FakeAgent>): Promise<void> {
  const envs = await environments(orchd);
  for (const [hostId, agent] of agents) {
    const mine = envs.filter((e) => e.host_id === hostId);
    const held = mine.filter((e) => HOLDING.includes(e.state)).reduce((n, e) => n + e.spec.cpus, 0);
    expect(held, `CPUs held on ${hostId}`).toBeLessThanOrEqual(agent.info.capacity.cpus);
    const active = new Set(mine.filter((e) => e.state !== 'stopped' && e.state !== 'error').map((e) => e.id));
    for (const vm of agent.vms.keys()) expect(active.has(vm), `VM ${vm} on ${hostId} is orphaned`).toBe(true);
  }
}

/** Stops every active environment, so the next case starts with empty hosts. */
async function clear(orchd: OrchdProcess, agents: Map<string, FakeAgent>): Promise<void> {
  for (const e of await environments(orchd)) {
    if (e.state !== 'stopped' && e.state !== 'error')
      expect((await orchd.request('DELETE', `/v1/environments/${e.id}`, as)).status).toBe(200);
  }
  await until(async () => [...agents.values()].every((a) => a.vms.size === 0));
}

/**
 * Bursts of creates on several orchd replicas sharing one PostgreSQL, against fake hosts that speak
 * the agent protocol (VMs "boot" in 50 ms). Server store only: replicas share a database server.
 */
describeStore('server')('a burst of creates over three orchds', () => {
  const orchds: OrchdProcess[] = [];
  const agents = new Map<string, FakeAgent>();
  let shared: Record<string, string>;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    shared = {
      ...orchdStoreEnv(await openStore('server'), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
    };
    for (let i = 0; i < 3; i++) orchds.push(await OrchdProcess.start(shared));
    for (let i = 1; i <= 4; i++) {
      const agent = await FakeAgent.start(AGENT_TOKEN, SMALL_HOST);
      const reg = await orchds[0]!.request('POST', '/v1/hosts', {
        ...as,
        body: { id: `h${i}`, kind: 'microvm', agent_url: agent.url, agent_token: AGENT_TOKEN },
      });
      expect(reg.status).toBe(201);
      agents.set(`h${i}`, agent);
    }
  });

  afterAll(async () => {
    await Promise.all(orchds.map((o) => o.stop()));
    await Promise.all([...agents.values()].map((a) => a.close()));
  });

  test('100 creates at once place exactly the 16 that fit, twice; the rest are told why; reads and health checks are served meanwhile', async () => {
    for (const round of [1, 2]) {
      const reads: Promise<number>[] = [];
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) => {
          const orchd = orchds[i % 3]!;
          if (i % 10 === 0) reads.push(orchd.request('GET', '/v1/hosts', as).then((r) => r.status));
          return create(orchd, `burst-${round}`);
        }),
      );
      const placed = answers.filter((a) => a.status === 201);
      const refused = answers.filter((a) => a.status !== 201);
      expect(
        placed,
        orchds
          .flatMap((o) =>
            o.output.filter(
              (l) =>
                (l.includes('"level":40') || l.includes('"level":50')) && !l.includes('no host can take'),
            ),
          )
          .slice(0, 8)
          .join('\n'),
      ).toHaveLength(16);
      for (const a of refused) {
        expect(a.status).toBe(503);
        const { error } = (a as { body: { error: { code: string; message: string } } }).body;
        expect(error.code).toBe('unavailable');
        // Capacity, never the store: "no host can take this environment now: h1: 0 of 1 cpus free; ...".
        expect(error.message).toMatch(/^no host can take this environment now: h1: 0 of 1 cpus free/);
      }
      expect(await Promise.all(reads)).toEqual(Array(reads.length).fill(200));
      // Exactly what was acknowledged runs: 4 on each host, none more (no phantom).
      await until(
        async () => (await environments(orchds[1]!, `?task_id=burst-${round}&state=running`)).length === 16,
      );
      const envs = await environments(orchds[2]!, `?task_id=burst-${round}`);
      expect(envs.map((e) => e.id).sort()).toEqual(
        placed.map((a) => (a as { body: Environment }).body.id).sort(),
      );
      for (const agent of agents.values()) expect(agent.vms.size).toBe(4);
      await expectConsistent(orchds[0]!, agents);
      await clear(orchds[0]!, agents);
    }
  });

  test('a create retried with the same Idempotency-Key on another orchd gets the first environment; another request under that key is 409', async () => {
    const key = `retry-${randomBytes(4).toString('hex')}`;
    const first = await create(orchds[0]!, 'keyed', key);
    expect(first.status).toBe(201);
    const id = (first as { body: Environment }).body.id;
    const again = await create(orchds[1]!, 'keyed', key);
    expect(again).toMatchObject({ status: 201, body: { id, task_id: 'keyed' } });
    expect((again as { headers: Headers }).headers.get('idempotent-replayed')).toBe('true');
    expect((first as { headers: Headers }).headers.get('idempotent-replayed')).toBeNull();
    const other = await create(orchds[2]!, 'another-task', key);
    expect(other).toMatchObject({
      status: 409,
      body: {
        error: { code: 'conflict', details: { reason: 'idempotency_key_reused', environment_id: id } },
      },
    });
    // The same key sent at once to all three orchds: one environment, every answer names it.
    const raced = `race-${randomBytes(4).toString('hex')}`;
    const answers = await Promise.all(orchds.map((o) => create(o, 'raced', raced)));
    const ids = new Set(answers.map((a) => (a as { body: Environment }).body.id));
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201]);
    expect(ids.size).toBe(1);
    expect(await environments(orchds[0]!, '?task_id=raced')).toHaveLength(1);
    const created = [...agents.values()].flatMap((a) => a.created.filter((c) => c.id === [...ids][0]));
    expect(created).toHaveLength(1);
    // A malformed key is refused before anything is placed.
    const bad = await orchds[0]!.request('POST', '/v1/environments', {
      ...as,
      body: request('bad-key'),
      headers: { 'idempotency-key': 'has space' },
    });
    expect(bad).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_argument', details: { field: 'Idempotency-Key' } } },
    });
    await clear(orchds[0]!, agents);
  });

  test('a recording failure after the agent answered: the create succeeds and runs; one VM', async () => {
    // SQL access to the store: a trigger refuses the first writes of `running` for this task.
    const sql = new pg.Client({ connectionString: shared.DATABASE_URL });
    await sql.connect();
    try {
      // The first two writes of `running` for this task fail in the store, as an outage would.
      await sql.query(`
        CREATE SEQUENCE refuse_running;
        CREATE FUNCTION refuse_running() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.task_id = 'record-fails' AND NEW.state = 'running' AND nextval('refuse_running') <= 2 THEN
            RAISE EXCEPTION 'refused by the test';
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_running BEFORE UPDATE ON environments FOR EACH ROW EXECUTE FUNCTION refuse_running();
      `);
      for (const a of agents.values()) a.createAnswersRunning = true;
      const answer = await create(orchds[0]!, 'record-fails');
      for (const a of agents.values()) a.createAnswersRunning = false;
      expect(answer).toMatchObject({ status: 201, body: { state: 'creating' } });
      const id = (answer as { body: Environment }).body.id;
      await until(
        async () =>
          ((await orchds[0]!.request('GET', `/v1/environments/${id}`, as)).body as Environment).state !==
          'creating',
      );
      expect((await orchds[0]!.request('GET', `/v1/environments/${id}`, as)).body).toMatchObject({
        state: 'running',
      });
      expect(
        Number((await sql.query(`SELECT last_value FROM refuse_running`)).rows[0].last_value),
      ).toBeGreaterThan(2);
      const all = [...agents.values()];
      expect(all.flatMap((a) => a.created.filter((c) => c.id === id))).toHaveLength(1);
      expect(all.filter((a) => a.vms.has(id))).toHaveLength(1);
    } finally {
      await sql.query('DROP TRIGGER IF EXISTS refuse_running ON environments').catch(() => undefined);
      await sql.end();
    }
    await clear(orchds[0]!, agents);
  });

  test('an orchd SIGKILLed mid-burst: nothing overbooked, nothing orphaned after the reconciler, no phantom from the survivors', async () => {
    const victim = await OrchdProcess.start(shared);
    const targets = [orchds[0]!, orchds[1]!, victim];
    let killed: Promise<void> | undefined;
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const orchd = targets[i % 3]!;
        return create(orchd, `kill-${i % 3}`).then((a) => {
          // Mid-burst: as soon as the first answer of any orchd is back.
          killed ??= victim.kill('SIGKILL');
          return a;
        });
      }),
    );
    await killed;
    await reconcileRounds(orchds[0]!, 2);
    await expectConsistent(orchds[0]!, agents);
    // Every VM the dead orchd's agents made belongs to a record the reconciler has running.
    await until(async () => {
      const running = new Set((await environments(orchds[1]!, '?state=running')).map((e) => e.id));
      return [...agents.values()].every((a) => [...a.vms.keys()].every((id) => running.has(id)));
    });
    // The survivors acknowledged exactly what they hold (errors left nothing active).
    for (const i of [0, 1]) {
      const acked = answers.filter((a, n) => n % 3 === i && a.status === 201).length;
      const active = (await environments(orchds[0]!, `?task_id=kill-${i}`)).filter((e) =>
        HOLDING.includes(e.state),
      );
      expect(active.length, `orchd ${i}`).toBe(acked);
    }
    await expectConsistent(orchds[1]!, agents);
  });
});

/** One orchd, one host: creates that fail after the agent was asked. */
describeStores('failed creates on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
      ORCH_AGENT_TIMEOUT_SEC: '1',
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test('an agent that creates the VM and then times out: the create is an error, its VM is deleted, its capacity and key are free', async () => {
    agent.hangAfterCreate = true;
    const key = `timeout-${randomBytes(4).toString('hex')}`;
    // The whole host (8 CPUs), so the next create fits only if this one let go of its capacity.
    const failed = await create(orchd, 'hangs', key, 8);
    agent.hangAfterCreate = false;
    expect(failed).toMatchObject({ status: 503, body: { error: { code: 'unavailable' } } });
    const [env] = await environments(orchd, '?task_id=hangs');
    expect(env).toMatchObject({ state: 'error' });
    expect(agent.created.some((c) => c.id === env!.id)).toBe(true);
    expect(agent.vms.has(env!.id)).toBe(false);
    // The key was given up with it: the retry creates afresh, and fits.
    const retried = await create(orchd, 'hangs', key, 8);
    expect(retried.status).toBe(201);
    expect((retried as { body: Environment }).body.id).not.toBe(env!.id);
    await reconcileRounds(orchd, 2);
    expect((await orchd.request('GET', `/v1/environments/${env!.id}`, as)).body).toMatchObject({
      state: 'error',
    });
    expect(agent.vms.has(env!.id)).toBe(false);
    await clear(orchd, new Map([['h1', agent]]));
  });
});
