// Snapshots travel (issue 17): `node bench/travel.mjs [rounds]`.
//
// (a) Move downtime vs a cold boot on the target: two agents on loopback, TCG, busybox, 1 vCPU,
//     256 MiB, a counter running. A move is what orchd's drain asks the agents to do: pause on the
//     source, a live artifact of the paused VM, the target fetches it (verified), the target starts
//     the VM from it; downtime = pause request to the target VM running. The cold boot is a fresh
//     VM on the target (POST /v1/vms until running).
// (b) Export and fetch throughput of that artifact (disk + memory state) vs a plain `cp` of the
//     same bytes: export to a directory, export to s3rver on loopback (multipart), fetch from the
//     source agent, fetch from the directory export. Prints `uptime` at the start and the end.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchAgent } from './lib/agent.mjs';

const rounds = Number(process.argv[2] ?? 3);
const require = createRequire(import.meta.url);
const S3rver = require('s3rver');
const load = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

console.log(`start: ${load()}`);
const work = mkdtempSync(join(tmpdir(), 'orch-travel-bench-'));
const s3Port = 45000 + Math.floor(Math.random() * 1000);
const s3 = new S3rver({
  port: s3Port,
  address: '127.0.0.1',
  silent: true,
  directory: join(work, 's3'),
  configureBuckets: [{ name: 'bench' }],
});
await s3.run();
const env = {
  AGENT_S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
  AGENT_S3_ACCESS_KEY_ID: 'S3RVER',
  AGENT_S3_SECRET_ACCESS_KEY: 'S3RVER',
  AGENT_EXPORT_ROOTS: join(work, 'exports'),
};
const a = await startBenchAgent({ images: ['busybox'], env });
const b = await startBenchAgent({ images: ['busybox'], env });

const vm = (id, extra = {}) => ({
  id,
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
  manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
  startup_script:
    '(i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &\n',
  secrets: {},
  expose: [],
  ...extra,
});
async function waitRunning(agent, id) {
  for (;;) {
    const v = await agent.api('GET', `/v1/vms/${id}`);
    if (v.state === 'running') return v;
    if (v.state !== 'creating') throw new Error(`${id}: ${v.state} ${v.error}`);
    await sleep(20);
  }
}
const dirBytes = (dir) => readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
const results = { cold: [], downtime: [], pause: [], artifact: [], fetch: [], start: [] };
const tput = { cp: [], exportFile: [], exportS3: [], fetchAgent: [], fetchExport: [] };
let bytes = 0;

for (let r = 0; r < rounds; r++) {
  // Cold boot on the target.
  let t = performance.now();
  await b.api('POST', '/v1/vms', vm(`cold${r}`));
  await waitRunning(b, `cold${r}`);
  results.cold.push((performance.now() - t) / 1000);
  await b.api('DELETE', `/v1/vms/cold${r}`);

  // A VM on the source, moved to the target.
  const id = `mv${r}`;
  await a.api('POST', '/v1/vms', vm(id));
  await waitRunning(a, id);
  await sleep(1000);
  const t0 = performance.now();
  await a.api('POST', `/v1/vms/${id}/pause`);
  const t1 = performance.now();
  const art = await a.api('POST', `/v1/vms/${id}/snapshots`, { snapshot_id: `art${r}`, live: true });
  const t2 = performance.now();
  await b.api('POST', `/v1/snapshots/art${r}/fetch`, {
    digest: art.digest,
    state_digest: art.state_digest,
    source: { agent_url: a.url, agent_token: 'bench-agent-token' },
  });
  const t3 = performance.now();
  await b.api('POST', '/v1/vms', vm(id, { restore_snapshot_id: `art${r}` }));
  await waitRunning(b, id);
  const t4 = performance.now();
  results.downtime.push((t4 - t0) / 1000);
  results.pause.push((t1 - t0) / 1000);
  results.artifact.push((t2 - t1) / 1000);
  results.fetch.push((t3 - t2) / 1000);
  results.start.push((t4 - t3) / 1000);
  tput.fetchAgent.push((t3 - t2) / 1000);

  // Throughput of the artifact's bytes.
  const src = join(a.dataDir, 'snapshots', `art${r}`);
  bytes = dirBytes(src);
  t = performance.now();
  execFileSync('cp', ['-r', src, join(work, `cp${r}`)]);
  tput.cp.push((performance.now() - t) / 1000);
  t = performance.now();
  await a.api('POST', `/v1/snapshots/art${r}/export`, { destination: `file://${work}/exports` });
  tput.exportFile.push((performance.now() - t) / 1000);
  t = performance.now();
  await b.api('POST', `/v1/snapshots/fx${r}/fetch`, {
    digest: art.digest,
    state_digest: art.state_digest,
    source: { export_ref: `file://${work}/exports/art${r}` },
  });
  tput.fetchExport.push((performance.now() - t) / 1000);
  try {
    t = performance.now();
    await a.api('POST', `/v1/snapshots/art${r}/export`, { destination: 's3://bench/travel' });
    tput.exportS3.push((performance.now() - t) / 1000);
  } catch (err) {
    console.log(`s3 export skipped: ${err.message.slice(0, 200)}`);
  }
  for (const [agent, sid] of [
    [a, `art${r}`],
    [b, `art${r}`],
    [b, `fx${r}`],
  ])
    await agent.api('DELETE', `/v1/snapshots/${sid}`).catch(() => undefined);
  await a.api('DELETE', `/v1/vms/${id}`);
  await b.api('DELETE', `/v1/vms/${id}`);
  console.log(
    `round ${r + 1}: cold ${results.cold[r].toFixed(2)} s, move downtime ${results.downtime[r].toFixed(2)} s (pause ${results.pause[r].toFixed(2)}, artifact ${results.artifact[r].toFixed(2)}, fetch ${results.fetch[r].toFixed(2)}, start ${results.start[r].toFixed(2)}); ${(bytes / 2 ** 20).toFixed(1)} MiB: cp ${tput.cp[r].toFixed(2)} s, export file ${tput.exportFile[r].toFixed(2)} s, export s3 ${tput.exportS3[r]?.toFixed(2) ?? '-'} s, fetch from agent ${tput.fetchAgent[r].toFixed(2)} s, fetch from export ${tput.fetchExport[r].toFixed(2)} s`,
  );
}

const mib = bytes / 2 ** 20;
console.log(`\nmedians of ${rounds} (artifact ${mib.toFixed(1)} MiB):`);
for (const [k, v] of Object.entries(results)) console.log(`  ${k.padEnd(10)} ${median(v).toFixed(2)} s`);
console.log(`  cold / downtime: ${(median(results.cold) / median(results.downtime)).toFixed(2)}x`);
for (const [k, v] of Object.entries(tput)) {
  if (v.length === 0) continue;
  console.log(`  ${k.padEnd(12)} ${median(v).toFixed(2)} s = ${(mib / median(v)).toFixed(0)} MiB/s`);
}
console.log(`end: ${load()}`);
await a.stop();
await b.stop();
await s3.close();
rmSync(work, { recursive: true, force: true });
