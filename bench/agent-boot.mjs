// orch-agent VM timings under TCG, interleaved in one run (the machine is noisy: compare ratios).
//   (a) cold boot to guest-ready through the agent (POST /v1/vms until GET says `running`, i.e.
//       the guest agent has said hello and the startup script was handed over) vs raw
//       qemu-system-x86_64 booting the same kernel, initramfs and image (process start until the
//       guest agent's hello on its virtio-serial socket);
//   (b) live resume (POST /v1/vms with restore_snapshot_id of a live snapshot, until `running`
//       and the guest answers a ping) vs cold boot through the agent;
//   (c) snapshot size and time, live and disk, of a 256 MiB guest.
// Needs `npm run build` and the guest assets (`orch-agent setup` into the directory
// `node scripts/test-agent-assets.mjs` prints, done by npm test).
//
//   node bench/agent-boot.mjs [rounds]     (default 5)
import { ASSETS, startBenchAgent } from './lib/agent.mjs';
import { rawQemuBoot } from './lib/raw-qemu.mjs';

const rounds = Number(process.argv[2] ?? 5);
const { api, stop } = await startBenchAgent({ logLevel: 'info' });

const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 };
const vmBody = (id, extra = {}) => ({ id, spec, manifest_inline: '', startup_script: 'true\n', ...extra });

async function waitRunning(id) {
  for (;;) {
    const vm = await api('GET', `/v1/vms/${id}`);
    if (vm.state === 'running') return;
    if (vm.state !== 'creating') throw new Error(`${id}: ${vm.state}: ${vm.error}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function agentBoot(id, extra) {
  const t0 = performance.now();
  await api('POST', '/v1/vms', vmBody(id, extra));
  await waitRunning(id);
  return performance.now() - t0;
}

const rawBoot = (i) => rawQemuBoot(ASSETS, 'busybox', i);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const raw = [];
const viaAgent = [];
const live = [];
const snapLive = [];
const snapDisk = [];
let liveSize = 0;
let diskSize = 0;
try {
  // Warm-up (page cache, QEMU binary).
  await rawBoot('w');
  await agentBoot('warm');
  for (let i = 0; i < rounds; i++) {
    raw.push(await rawBoot(i));
    viaAgent.push(await agentBoot(`cold-${i}`));
    // (c): a counter runs in the 256 MiB guest while it is snapshotted.
    await api('POST', `/v1/vms/cold-${i}/exec`, {
      argv: [
        'sh',
        '-c',
        '(i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.1; done) >/dev/null 2>&1 &',
      ],
    });
    let t0 = performance.now();
    const l = await api('POST', `/v1/vms/cold-${i}/snapshots`, { snapshot_id: `live-${i}`, live: true });
    snapLive.push(performance.now() - t0);
    liveSize = l.size_bytes;
    t0 = performance.now();
    const d = await api('POST', `/v1/vms/cold-${i}/snapshots`, { snapshot_id: `disk-${i}` });
    snapDisk.push(performance.now() - t0);
    diskSize = d.size_bytes;
    await api('DELETE', `/v1/vms/cold-${i}`);
    // (b)
    live.push(await agentBoot(`live-${i}`, { restore_snapshot_id: `live-${i}` }));
    await api('POST', `/v1/vms/live-${i}/exec`, { argv: ['cat', '/tmp/c'] });
    await api('DELETE', `/v1/vms/live-${i}`);
    await api('DELETE', `/v1/snapshots/live-${i}`);
    await api('DELETE', `/v1/snapshots/disk-${i}`);
    process.stderr.write(`round ${i + 1}/${rounds} done\n`);
  }
  await api('DELETE', '/v1/vms/warm');
} finally {
  await stop();
}

const f = (ms) => `${(ms / 1000).toFixed(2)} s`;
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
console.log(`rounds: ${rounds}, 1 vCPU, 256 MiB, TCG, medians\n`);
console.log('| measure | median | runs |');
console.log('| --- | ---: | --- |');
console.log(`| (a) raw qemu-system-x86_64 to guest hello | ${f(median(raw))} | ${raw.map(f).join(', ')} |`);
console.log(
  `| (a) agent: POST /v1/vms to running | ${f(median(viaAgent))} | ${viaAgent.map(f).join(', ')} |`,
);
console.log(`| (b) agent: live restore to running | ${f(median(live))} | ${live.map(f).join(', ')} |`);
console.log(
  `| (c) live snapshot of a 256 MiB guest (${mib(liveSize)}) | ${f(median(snapLive))} | ${snapLive.map(f).join(', ')} |`,
);
console.log(
  `| (c) disk snapshot (${mib(diskSize)}) | ${f(median(snapDisk))} | ${snapDisk.map(f).join(', ')} |`,
);
console.log('');
console.log(`(a) agent / raw = **${(median(viaAgent) / median(raw)).toFixed(2)}x** (aim: within 1.3x)`);
console.log(
  `(b) cold boot / live resume = **${(median(viaAgent) / median(live)).toFixed(1)}x** faster (aim: at least 5x)`,
);
