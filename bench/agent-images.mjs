// orch-agent images under TCG (issue 19), interleaved in one run (the machine is shared: compare ratios).
//   (a) cold boot to `running` through the agent of `debian-12` vs `busybox`, and raw
//       qemu-system-x86_64 on the same images (bench/lib/raw-qemu.mjs: same kernel, command line
//       and devices, until the guest agent's hello);
//   (b) live resume of a `debian-12` guest (restore_snapshot_id of a live snapshot, until `running`)
//       vs its cold boot;
//   (c) image build and import times: `orch-agent setup` building `debian-12` from scratch
//       (mmdebstrap; skipped with --no-build), `image import` of a small OCI archive (static busybox,
//       umoci) and of a large one (the debian-12 root filesystem as one layer).
// Needs `npm run build` and the guest assets with both images (`orch-agent setup` into the directory
// `node scripts/test-agent-assets.mjs` prints, done by npm test; ORCH_TEST_AGENT_ASSETS points elsewhere).
//
//   node bench/agent-images.mjs [rounds] [--no-build]      (default 3 rounds)
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_BIN as AGENT, ASSETS, startBenchAgent } from './lib/agent.mjs';
import { rawQemuBoot } from './lib/raw-qemu.mjs';

const rounds = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 3);
const build = !process.argv.includes('--no-build');
const work = mkdtempSync(join(tmpdir(), 'orch-images-bench-'));
const dataDir = join(work, 'data');
mkdirSync(dataDir);
const loads = [loadavg()[0]];
const sh = (cmd) =>
  execFileSync('sh', ['-c', cmd], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const timed = (fn) => {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
};

const { api, stop } = await startBenchAgent({ dataDir, images: ['busybox', 'debian-12'] });

const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 };
async function agentBoot(id, image, extra = {}) {
  const t0 = performance.now();
  await api('POST', '/v1/vms', {
    id,
    spec: image ? { ...spec, image } : spec,
    manifest_inline: '',
    startup_script: 'true\n',
    ...extra,
  });
  for (;;) {
    const vm = await api('GET', `/v1/vms/${id}`);
    if (vm.state === 'running') return performance.now() - t0;
    if (vm.state !== 'creating') throw new Error(`${id}: ${vm.state}: ${vm.error}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const m = { rawBusybox: [], rawDebian: [], busybox: [], debian: [], live: [] };
const t = {};
try {
  await rawQemuBoot(ASSETS, 'debian-12', 'w'); // warm-up: page cache, QEMU binary
  await agentBoot('warm', 'debian-12');
  await api('DELETE', '/v1/vms/warm');
  for (let i = 0; i < rounds; i++) {
    m.rawBusybox.push(await rawQemuBoot(ASSETS, 'busybox', `b${i}`));
    m.rawDebian.push(await rawQemuBoot(ASSETS, 'debian-12', `d${i}`));
    m.busybox.push(await agentBoot(`bb-${i}`, 'busybox'));
    await api('DELETE', `/v1/vms/bb-${i}`);
    m.debian.push(await agentBoot(`deb-${i}`, 'debian-12'));
    await api('POST', `/v1/vms/deb-${i}/exec`, { argv: ['python3', '-c', 'print(1)'] });
    await api('POST', `/v1/vms/deb-${i}/snapshots`, { snapshot_id: `live-${i}`, live: true });
    await api('DELETE', `/v1/vms/deb-${i}`);
    m.live.push(await agentBoot(`live-${i}`, undefined, { restore_snapshot_id: `live-${i}` }));
    await api('POST', `/v1/vms/live-${i}/exec`, { argv: ['python3', '-c', 'print(2)'] });
    await api('DELETE', `/v1/vms/live-${i}`);
    await api('DELETE', `/v1/snapshots/live-${i}`);
    loads.push(loadavg()[0]);
    process.stderr.write(`round ${i + 1}/${rounds} done\n`);
  }
  // (c) imports: a small OCI archive (static busybox) and a large one (the debian-12 tree).
  const L = join(work, 'layout');
  sh(`umoci init --layout ${L} && umoci new --image ${L}:small && umoci unpack --image ${L}:small ${work}/b`);
  sh(
    `mkdir -p ${work}/b/rootfs/bin && cp /bin/busybox ${work}/b/rootfs/bin/ && ln -s busybox ${work}/b/rootfs/bin/sh`,
  );
  sh(`umoci repack --image ${L}:small ${work}/b && rm -rf ${work}/b`);
  sh(`umoci new --image ${L}:large && umoci unpack --image ${L}:large ${work}/b`);
  sh(
    `debugfs -R 'rdump / ${work}/b/rootfs' ${join(ASSETS, 'images/debian-12/rootfs.img')} 2>/dev/null; rm -rf ${work}/b/rootfs/orch ${work}/b/rootfs/lost+found`,
  );
  sh(`umoci repack --image ${L}:large ${work}/b && rm -rf ${work}/b`);
  for (const tag of ['small', 'large']) {
    sh(`skopeo --insecure-policy copy -q oci:${L}:${tag} oci-archive:${work}/${tag}.tar`);
    t[`${tag}Size`] = Number(sh(`stat -c %s ${work}/${tag}.tar`));
    t[tag] = timed(() =>
      sh(`node ${AGENT} image import ${tag} oci-archive:${work}/${tag}.tar --data-dir ${dataDir}`),
    );
  }
  loads.push(loadavg()[0]);
  if (build) {
    const d = join(work, 'build');
    mkdirSync(d);
    cpSync(join(ASSETS, 'kernel'), join(d, 'kernel'), { recursive: true });
    t.setupDebian = timed(() => sh(`AGENT_IMAGES=debian-12 node ${AGENT} setup --data-dir ${d} >/dev/null`));
    t.setupCached = timed(() => sh(`AGENT_IMAGES=debian-12 node ${AGENT} setup --data-dir ${d} >/dev/null`));
    t.debianImage = JSON.parse(readFileSync(join(d, 'images/debian-12/image.json'), 'utf8')).size_bytes;
    loads.push(loadavg()[0]);
  }
} finally {
  await stop();
  rmSync(work, { recursive: true, force: true });
}

const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const f = (ms) => `${(ms / 1000).toFixed(2)} s`;
const mib = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
const row = (name, xs) => console.log(`| ${name} | ${f(med(xs))} | ${xs.map(f).join(', ')} |`);
console.log(
  `rounds: ${rounds}, 1 vCPU, 256 MiB, TCG, medians; 1-min load average during the run: ${loads.map((l) => l.toFixed(1)).join(' -> ')} (2 cores)\n`,
);
console.log('| measure | median | runs |');
console.log('| --- | ---: | --- |');
row('(a) raw qemu, busybox image, to guest hello', m.rawBusybox);
row('(a) raw qemu, debian-12 image, to guest hello', m.rawDebian);
row('(a) agent: busybox, POST /v1/vms to running', m.busybox);
row('(a) agent: debian-12, POST /v1/vms to running', m.debian);
row('(b) agent: debian-12 live restore to running', m.live);
console.log('');
console.log(
  `(a) debian-12: agent / raw = **${(med(m.debian) / med(m.rawDebian)).toFixed(2)}x** (aim: within 1.3x); busybox: ${(med(m.busybox) / med(m.rawBusybox)).toFixed(2)}x; debian-12 / busybox (agent) = ${(med(m.debian) / med(m.busybox)).toFixed(2)}x`,
);
console.log(`(b) debian-12 cold boot / live resume = **${(med(m.debian) / med(m.live)).toFixed(1)}x**`);
console.log('');
console.log(
  `(c) image import, small OCI archive (${mib(t.smallSize)}): ${f(t.small)}; large (${mib(t.largeSize)}, the debian-12 tree): ${f(t.large)}`,
);
if (build)
  console.log(
    `(c) orch-agent setup building debian-12 (${mib(t.debianImage)} image): ${f(t.setupDebian)}; second run (cached): ${f(t.setupCached)}`,
  );
