// The cost of network isolation (packages/agent README, "Network isolation"), side by side in one
// run: two agents on the same host, one with AGENT_ISOLATION=on (each VM's QEMU as its own uid
// through setpriv, inputs as inherited descriptors, nftables rules on its sockets) and one with
// AGENT_ISOLATION=off (QEMU as root, as before), rounds interleaved:
//   (a) cold boot of a busybox VM through the agent (POST /v1/vms until `running`);
//   (b) throughput of an exposed port: the host downloads a 64 MiB file from busybox httpd in the
//       guest through QEMU's hostfwd (the guest -> host direction of every reply: the packets the
//       isolated agent's nftables chain sees, `ct state established` accepting them).
// Needs `npm run build` and the guest assets (`orch-agent setup` into the directory
// `node scripts/test-agent-assets.mjs` prints, done by npm test). Run as root.
//
//   node bench/net-isolation.mjs [rounds]     (default 5)
import { execFileSync } from 'node:child_process';
import { startBenchAgent } from './lib/agent.mjs';

const rounds = Number(process.argv[2] ?? 5);
const FILE_MB = 64;
const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 };
const script = `mkdir -p /tmp/www && dd if=/dev/urandom of=/tmp/www/blob bs=1M count=${FILE_MB} 2>/dev/null && httpd -p 8080 -h /tmp/www\n`;
const body = (id) => ({
  id,
  spec,
  manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
  startup_script: script,
  expose: [{ port: 8080, as: 'web' }],
});

const agents = {
  on: await startBenchAgent({
    images: ['busybox'],
    env: { AGENT_ISOLATION: 'on', AGENT_VM_UIDS: '913000-913099' },
  }),
  off: await startBenchAgent({ images: ['busybox'], env: { AGENT_ISOLATION: 'off' } }),
};

async function waitRunning(api, id) {
  for (;;) {
    const vm = await api('GET', `/v1/vms/${id}`);
    if (vm.state === 'running') return vm;
    if (vm.state !== 'creating') throw new Error(`${id}: ${vm.state}: ${vm.error}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Seconds from create to running, and the VM. */
async function boot(mode, id) {
  const { api } = agents[mode];
  const t0 = performance.now();
  await api('POST', '/v1/vms', body(id));
  const vm = await waitRunning(api, id);
  return { s: (performance.now() - t0) / 1000, vm };
}

/** MiB/s of one download of the guest's blob through its exposed port (waits for httpd first). */
async function download(vm) {
  const url = `http://127.0.0.1:${vm.ports[0].host_port}/blob`;
  for (let i = 0; ; i++) {
    try {
      const t0 = performance.now();
      const res = await fetch(url);
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      let n = 0;
      for await (const chunk of res.body) n += chunk.length;
      if (n !== FILE_MB * 2 ** 20) throw new Error(`got ${n} bytes`);
      return n / 2 ** 20 / ((performance.now() - t0) / 1000);
    } catch (err) {
      if (i > 600) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = { on: { boot: [], mbps: [] }, off: { boot: [], mbps: [] } };
try {
  for (let i = 0; i < rounds; i++) {
    // Alternate which mode goes first, so neither always runs on a warmer machine.
    for (const mode of i % 2 ? ['off', 'on'] : ['on', 'off']) {
      const { s, vm } = await boot(mode, `bench-${mode}-${i}`);
      results[mode].boot.push(s);
      await download(vm); // warm-up: the guest's page cache and httpd
      results[mode].mbps.push(await download(vm));
      await agents[mode].api('DELETE', `/v1/vms/${vm.id}`);
    }
    process.stderr.write(`round ${i + 1}/${rounds} done\n`);
  }
} finally {
  await agents.on.stop();
  await agents.off.stop();
  execFileSync('nft', ['delete', 'table', 'inet', 'orch_agent_913000_913099'], { stdio: 'ignore' });
}

const f = (x) => x.toFixed(2);
console.log(`uptime: ${execFileSync('uptime', { encoding: 'utf8' }).trim()}`);
console.log(`rounds: ${rounds}, busybox guest 1 vCPU 256 MiB, TCG, ${FILE_MB} MiB download`);
console.log('| measure | isolation on | isolation off | on / off |');
console.log('| --- | ---: | ---: | ---: |');
const bOn = median(results.on.boot);
const bOff = median(results.off.boot);
console.log(`| cold boot to running (median) | ${f(bOn)} s | ${f(bOff)} s | ${f(bOn / bOff)}x |`);
const tOn = median(results.on.mbps);
const tOff = median(results.off.mbps);
console.log(`| exposed port download (median) | ${f(tOn)} MiB/s | ${f(tOff)} MiB/s | ${f(tOn / tOff)}x |`);
console.log(
  `boots on: ${results.on.boot.map(f).join(', ')} s; off: ${results.off.boot.map(f).join(', ')} s; MiB/s on: ${results.on.mbps.map(f).join(', ')}; off: ${results.off.mbps.map(f).join(', ')}`,
);
