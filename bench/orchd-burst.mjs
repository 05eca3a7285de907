// Bursts of creates on orchd replicas (issue 31): N creates of 1 CPU fired at once, spread round-robin
// over R orchd processes sharing one PostgreSQL server (fsync on), against H fake hosts of 4 CPUs
// that speak the agent protocol (bench/lib/fake-hosts.mjs: VMs run at once). For each burst:
// decisions per second (creates answered, placed or refused, over the burst's wall time), p50/p99
// create latency, the outcome counts, and after the burst settles, what the hosts hold against what
// was acknowledged: placed = min(N, 4H) exactly, 0 store errors, 0 phantoms (an environment active
// or a VM on a host that no 201 acknowledged), 0 hosts overbooked. Each orchd is warmed up first
// (10 creates, then stopped), as a running control plane is.
//
//   node bench/orchd-burst.mjs                       this build
//   ORCHD_BASELINE_BIN=/path/to/orchd.js node bench/orchd-burst.mjs
//                                                    also the baseline build, side by side, on the
//                                                    bursts of 100 (at ~10 decisions/s a burst of
//                                                    1000 would take minutes; BASELINE_ALL=1 runs them)
import { randomBytes } from 'node:crypto';
import { TestPostgres } from '@support/pg/test-server';
import { startFakeHost } from './lib/fake-hosts.mjs';
import { startOrchd } from './lib/orchd.mjs';

const TOKEN = 'bench-master';
const AGENT_TOKEN = 'bench-agent';
const CASES = [];
for (const replicas of [1, 3])
  for (const hosts of [4, 50]) for (const creates of [100, 1000]) CASES.push({ replicas, hosts, creates });
const builds = [{ name: 'this', bin: undefined }];
if (process.env.ORCHD_BASELINE_BIN) builds.push({ name: 'baseline', bin: process.env.ORCHD_BASELINE_BIN });
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const REQUEST = JSON.stringify({
  task_id: 'burst',
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
  manifest_inline: Buffer.from('{"version":"1","machine":{"workspace":"/workspace"},"services":{}}').toString(
    'base64',
  ),
  secrets: {},
  startup_script: '#!/bin/sh\n',
  expose: [],
});

const pg = await TestPostgres.start({ fsync: 'on', max_connections: '300' });
const rows = [];
try {
  let n = 0;
  for (const c of CASES) {
    for (const build of builds) {
      if (build.name === 'baseline' && c.creates > 100 && !process.env.BASELINE_ALL) continue;
      const url = await pg.createDatabase(`burst_${n++}`);
      rows.push({ ...c, build: build.name, ...(await burst(url, c, build.bin)) });
      const r = rows.at(-1);
      console.error(JSON.stringify(r));
    }
  }
} finally {
  await pg.destroy();
}

console.log(
  '| replicas | hosts | creates | build | decisions/s | p50 ms | p99 ms | placed / fit | refused: no capacity | store errors | other errors | phantoms | overbooked hosts |',
);
console.log(
  '| -------: | ----: | ------: | ----- | ----------: | -----: | -----: | -----------: | -------------------: | -----------: | -----------: | -------: | ---------------: |',
);
for (const r of rows) {
  console.log(
    `| ${r.replicas} | ${r.hosts} | ${r.creates} | ${r.build} | ${r.rate.toFixed(0)} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${r.placed} / ${r.fit} | ${r.noCapacity} | ${r.storeErrors} | ${r.other} | ${r.phantoms} | ${r.overbooked} |`,
  );
}
const pairs = rows.filter((r) => r.build === 'baseline');
for (const b of pairs) {
  const t = rows.find(
    (r) => r.build === 'this' && r.replicas === b.replicas && r.hosts === b.hosts && r.creates === b.creates,
  );
  console.log(
    `ratio this/baseline, ${b.replicas} replicas, ${b.hosts} hosts, ${b.creates} creates: decisions/s ${(t.rate / b.rate).toFixed(1)}x, p99 ${(t.p99 / b.p99).toFixed(2)}x`,
  );
}

/** One burst on a fresh database: R orchds, H fake hosts, N creates. */
async function burst(databaseUrl, { replicas, hosts, creates }, bin) {
  const env = {
    DATABASE_URL: databaseUrl,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    ORCH_AUTH_TOKEN: TOKEN,
    ORCH_LOG_LEVEL: 'error',
    ORCH_PLACEMENT_QUEUE_MAX: '2000',
  };
  const orchds = [];
  for (let i = 0; i < replicas; i++) orchds.push(await startOrchd(env, bin));
  const fleet = [];
  try {
    for (let i = 0; i < hosts; i++) {
      const id = `h${String(i).padStart(3, '0')}`;
      const host = await startFakeHost({ token: AGENT_TOKEN, id });
      fleet.push(host);
      const reg = await fetch(`${orchds[0].url}/v1/hosts`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ id, kind: 'microvm', agent_url: host.url, agent_token: AGENT_TOKEN }),
      });
      if (reg.status !== 201) throw new Error(`register: ${reg.status} ${await reg.text()}`);
    }
    // Warm-up (a running orchd is warm; a fresh process compiles its code on the first requests):
    // 10 creates through each orchd, then every environment stopped again.
    await Promise.all(
      orchds.flatMap((o) =>
        Array.from({ length: 10 }, () =>
          fetch(`${o.url}/v1/environments`, { method: 'POST', headers, body: REQUEST }).then((r) => r.text()),
        ),
      ),
    );
    const warm = await (await fetch(`${orchds[0].url}/v1/environments`, { headers })).json();
    for (const e of warm.environments)
      await fetch(`${orchds[0].url}/v1/environments/${e.id}`, { method: 'DELETE', headers }).then((r) =>
        r.text(),
      );
    // Until every warm-up environment is stopped (a stop whose record lagged holds its capacity).
    const held = async () =>
      (await (await fetch(`${orchds[0].url}/v1/environments`, { headers })).json()).environments.some(
        (e) => !['stopped', 'error'].includes(e.state),
      );
    while (fleet.some((h) => h.vms.size > 0) || (await held())) await new Promise((r) => setTimeout(r, 200));
    const warmIds = new Set(warm.environments.map((e) => e.id));
    const latencies = [];
    const outcomes = { placed: 0, noCapacity: 0, storeErrors: 0, other: 0 };
    const acked = new Set();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: creates }, async (_, i) => {
        const start = performance.now();
        let status = 0;
        let text = '';
        try {
          const res = await fetch(`${orchds[i % replicas].url}/v1/environments`, {
            method: 'POST',
            headers,
            body: REQUEST,
          });
          status = res.status;
          text = await res.text();
        } catch (err) {
          text = err.message;
        }
        latencies.push(performance.now() - start);
        if (status === 201) {
          outcomes.placed++;
          acked.add(JSON.parse(text).id);
        } else if (status === 503 && text.includes('no host can take this environment now'))
          outcomes.noCapacity++;
        else if (text.includes('store')) outcomes.storeErrors++;
        else {
          outcomes.other++;
          if (outcomes.other <= 3) console.error(`other: ${status} ${text.slice(0, 300)}`);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    // Settle: until nothing is creating (VMs run at once; the watchers and reconcilers catch up).
    const list = async () => {
      const res = await fetch(`${orchds[0].url}/v1/environments`, { headers });
      return (await res.json()).environments;
    };
    let envs = await list();
    for (let i = 0; i < 100 && envs.some((e) => e.state === 'creating'); i++) {
      await new Promise((r) => setTimeout(r, 200));
      envs = await list();
    }
    const active = envs.filter((e) => !['stopped', 'error'].includes(e.state) && !warmIds.has(e.id));
    const vms = fleet.flatMap((h) => [...h.vms.keys()]);
    const phantoms =
      active.filter((e) => !acked.has(e.id)).length + vms.filter((id) => !acked.has(id)).length;
    const overbooked = fleet.filter((h) => h.vms.size > 4).length + fleet.filter((h) => h.refused > 0).length;
    latencies.sort((a, b) => a - b);
    const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
    return {
      rate: creates / seconds,
      p50: q(0.5),
      p99: q(0.99),
      fit: Math.min(creates, 4 * hosts),
      ...outcomes,
      phantoms,
      overbooked,
    };
  } finally {
    await Promise.all(orchds.map((o) => o.stop()));
    await Promise.all(fleet.map((h) => h.close()));
  }
}
