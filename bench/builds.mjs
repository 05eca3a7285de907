// Build layers (issue 15): a cold build of setup lines that take about 10 s in total, the same build
// fully cached, and `up --from-build` vs a plain `up` of the same definition, until the run line has
// run. One orch-agent (TCG, busybox) and one orchd (embedded store); medians of N interleaved rounds.
//   node bench/builds.mjs [rounds=3]
import { execSync } from 'node:child_process';
import { startBenchAgent } from './lib/agent.mjs';
import { startOrchd } from './lib/orchd.mjs';

const rounds = Number(process.argv[2] ?? 3);
const load = () => execSync('uptime').toString().trim();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const secs = (ms) => `${(ms / 1000).toFixed(2)} s`;

const SETUP = [
  'echo one >> /workspace/log && sleep 3',
  'echo two >> /workspace/log && sleep 3',
  'echo three >> /workspace/log && sleep 4',
];
const RUN = 'echo ran > /workspace/ran';
const SPEC = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 900 };
const WORKSPACE = '/workspace';
const manifest = Buffer.from(
  JSON.stringify({ version: '1', machine: { workspace: WORKSPACE }, services: {} }),
).toString('base64');
const script = (lines) => `#!/bin/sh\nset -eu\ncd ${WORKSPACE}\n${lines.join('\n')}\n`;

console.log(`load at start: ${load()}`);
const agent = await startBenchAgent({ images: ['busybox'] });
const orchd = await startOrchd({
  MICROVM_AGENT_TOKEN: 'bench-agent-token',
  ORCH_RECONCILE_INTERVAL_SEC: '2',
  ORCH_LOG_LEVEL: 'warn',
});
async function api(method, path, body) {
  const res = await fetch(`${orchd.url}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

async function build(noCache) {
  const t0 = performance.now();
  let b = await api('POST', '/v1/builds', {
    task_id: 'bench',
    spec: SPEC,
    workspace: WORKSPACE,
    setup: SETUP,
    no_cache: noCache,
  });
  while (b.state === 'running') {
    await pause(100);
    b = await api('GET', `/v1/builds/${b.id}`);
  }
  if (b.state !== 'ready') throw new Error(`build failed: ${b.last_error}`);
  return { ms: performance.now() - t0, build: b };
}

/** Creates an environment and waits until it is `running`, then until the run line has run. */
async function up(seed) {
  const t0 = performance.now();
  let env = await api('POST', '/v1/environments', {
    task_id: 'bench',
    spec: SPEC,
    manifest_inline: manifest,
    startup_script: script(seed ? [RUN] : [...SETUP, RUN]),
    ...(seed ? { seed_snapshot_id: seed } : {}),
  });
  while (env.state === 'creating') {
    await pause(100);
    env = await api('GET', `/v1/environments/${env.id}`);
  }
  if (env.state !== 'running') throw new Error(`environment ${env.state}: ${env.last_error}`);
  const running = performance.now() - t0;
  for (;;) {
    const r = await api('POST', `/v1/environments/${env.id}?action=exec`, {
      argv: ['test', '-f', `${WORKSPACE}/ran`],
    });
    if (r.exit_code === 0) break;
    await pause(100);
  }
  const ready = performance.now() - t0;
  const log = await api('POST', `/v1/environments/${env.id}?action=exec`, {
    argv: ['cat', `${WORKSPACE}/log`],
  });
  const lines = Buffer.from(log.stdout_base64, 'base64').toString().trim().split('\n');
  if (lines.length !== 3) throw new Error(`setup ran ${lines.length / 3} times: ${lines}`);
  await api('DELETE', `/v1/environments/${env.id}`);
  return { running, ready };
}

const m = { cold: [], cached: [], fromBuildRunning: [], fromBuild: [], plainRunning: [], plain: [] };
try {
  await api('POST', '/v1/hosts', { id: 'local', kind: 'microvm', agent_url: agent.url });
  for (let i = 0; i < rounds; i++) {
    const cold = await build(true);
    const cached = await build(false);
    if (cached.build.steps.some((s) => s.state !== 'cached'))
      throw new Error('the second build was not cached');
    const fb = await up(cached.build.artifact_snapshot_id);
    const plain = await up(undefined);
    m.cold.push(cold.ms);
    m.cached.push(cached.ms);
    m.fromBuildRunning.push(fb.running);
    m.fromBuild.push(fb.ready);
    m.plainRunning.push(plain.running);
    m.plain.push(plain.ready);
    console.log(
      `round ${i + 1}: cold build ${secs(cold.ms)}, cached build ${secs(cached.ms)}, ` +
        `up --from-build ${secs(fb.running)} running / ${secs(fb.ready)} run line done, ` +
        `plain up ${secs(plain.running)} running / ${secs(plain.ready)} run line done`,
    );
  }
} finally {
  await orchd.stop();
  await agent.stop();
}
console.log(`\nmedians of ${rounds} rounds:`);
console.log(`  cold build (3 lines, ~10 s of sleep)      ${secs(median(m.cold))}`);
console.log(`  fully cached build                        ${secs(median(m.cached))}`);
console.log(`  up --from-build: running                  ${secs(median(m.fromBuildRunning))}`);
console.log(`  up --from-build: run line done            ${secs(median(m.fromBuild))}`);
console.log(`  plain up: running                         ${secs(median(m.plainRunning))}`);
console.log(`  plain up: run line done (setup ran)       ${secs(median(m.plain))}`);
console.log(
  `  ratio plain / from-build (run line done)  ${(median(m.plain) / median(m.fromBuild)).toFixed(1)}x`,
);
console.log(`load at end: ${load()}`);
