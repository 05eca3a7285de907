// orch-agent pause and resume in place under TCG, interleaved in one run (the machine is shared
// and noisy: compare ratios, and note the load average printed at the start and the end):
//   cold boot      POST /v1/vms until GET says `running` (guest agent up, startup script handed over)
//   pause          POST /v1/vms/{id}/pause until it answers `paused` (guest sync, QMP stop, memory
//                  and devices migrated and encrypted to state.enc, QEMU ended)
//   resume         POST /v1/vms/{id}/resume until it answers `running` (QEMU started with -incoming,
//                  state decrypted into it, cont, guest agent answers, clock set)
// each on a fresh VM of the same definition (1 vCPU, 256 MiB, busybox image, a counter running);
// the size of the saved state is reported too.
// Needs `npm run build` and the guest assets (`orch-agent setup` into the directory
// `node scripts/test-agent-assets.mjs` prints, done by npm test).
//
//   node bench/pause-resume.mjs [rounds]     (default 5)
import { statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { startBenchAgent } from './lib/agent.mjs';

const rounds = Number(process.argv[2] ?? 5);
const { dataDir, api, stop } = await startBenchAgent();

const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 };
const startup = '(i=0; while :; do i=$((i+1)); echo $i > /run/counter; sleep 0.1; done) >/dev/null 2>&1 &\n';

async function waitRunning(id) {
  for (;;) {
    const vm = await api('GET', `/v1/vms/${id}`);
    if (vm.state === 'running') return;
    if (vm.state !== 'creating') throw new Error(`${id}: ${vm.state}: ${vm.error}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const timed = async (fn) => {
  const t0 = performance.now();
  const out = await fn();
  return [performance.now() - t0, out];
};

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const loadStart = load();
const cold = [];
const pause = [];
const resume = [];
const sizes = [];
try {
  for (let i = 0; i < rounds; i++) {
    const id = `bench-${i}`;
    const [boot] = await timed(async () => {
      await api('POST', '/v1/vms', { id, spec, manifest_inline: '', startup_script: startup });
      await waitRunning(id);
    });
    cold.push(boot);
    await new Promise((r) => setTimeout(r, 500)); // the counter runs
    const [p, paused] = await timed(() => api('POST', `/v1/vms/${id}/pause`));
    if (paused.state !== 'paused') throw new Error(`pause: ${paused.state}`);
    pause.push(p);
    sizes.push(statSync(join(dataDir, 'vms', id, 'state.enc')).size);
    const [r, resumed] = await timed(() => api('POST', `/v1/vms/${id}/resume`));
    if (resumed.state !== 'running') throw new Error(`resume: ${resumed.state}`);
    resume.push(r);
    await api('DELETE', `/v1/vms/${id}`);
  }
} finally {
  await stop();
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const row = (name, xs) => `${name.padEnd(44)} ${s(median(xs)).padStart(8)}   ${xs.map(s).join(', ')}`;
console.log(`load average at start: ${loadStart}; at the end: ${load()} (${rounds} rounds)`);
console.log(row('cold boot (POST /v1/vms until running)', cold));
console.log(row('pause (POST .../pause until paused)', pause));
console.log(row('resume (POST .../resume until running)', resume));
console.log(`saved state (state.enc): median ${(median(sizes) / 2 ** 20).toFixed(1)} MiB`);
console.log(`cold boot / resume: ${(median(cold) / median(resume)).toFixed(1)}x`);
