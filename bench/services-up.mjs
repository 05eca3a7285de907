// Manifest services (issue 14) under TCG: time from the create request to every service accepting
// connections, against the same image booted without services. Interleaved rounds (the machine is
// shared: compare within a round). Through the agent, since orchd adds the same constant to each.
//   (a) no services: the `busybox` image, the startup script starts busybox httpd on 8080 itself;
//   (b) one service: the same static busybox httpd as an OCI image (built here offline with umoci
//       and skopeo, imported with `orch-agent image import`), run by crun in the guest, port 8080;
//   (c) three services of that image on 8080, 8081, 8082.
// Each port is exposed; the clock stops when a GET through every forwarded port answers 200.
// Needs `npm run build` and the guest assets (`orch-agent setup` into the directory
// `node scripts/test-agent-assets.mjs` prints, done by npm test; ORCH_TEST_AGENT_ASSETS points elsewhere).
//
//   node bench/services-up.mjs [rounds]      (default 3)
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_BIN, startBenchAgent } from './lib/agent.mjs';

const rounds = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 3);
const work = mkdtempSync(join(tmpdir(), 'orch-services-bench-'));
const dataDir = join(work, 'data');
mkdirSync(join(dataDir, 'images'), { recursive: true });
const sh = (cmd) =>
  execFileSync('sh', ['-c', cmd], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const uptime = () => sh('uptime').trim();
const loads = [loadavg()[0]];

// The service image: static busybox, Entrypoint httpd on $PORT (Env PORT=8080).
const L = join(work, 'layout');
sh(`umoci init --layout ${L} && umoci new --image ${L}:web && umoci unpack --image ${L}:web ${work}/b`);
const root = join(work, 'b', 'rootfs');
mkdirSync(join(root, 'bin'), { recursive: true });
mkdirSync(join(root, 'www'), { recursive: true });
sh(`cp /bin/busybox ${root}/bin/busybox`);
for (const a of ['sh', 'httpd']) symlinkSync('busybox', join(root, 'bin', a));
writeFileSync(join(root, 'www', 'index.html'), 'ok\n');
writeFileSync(join(root, 'bin', 'start'), '#!/bin/sh\nexec httpd -f -p "$PORT" -h /www\n', { mode: 0o755 });
sh(`umoci repack --image ${L}:web ${work}/b`);
sh(
  `umoci config --image ${L}:web --config.env PATH=/bin --config.env PORT=8080 --config.entrypoint /bin/start`,
);
sh(`skopeo --insecure-policy copy --quiet oci:${L}:web oci-archive:${work}/web.tar`);
sh(
  `${process.execPath} ${AGENT_BIN} image import websvc oci-archive:${work}/web.tar --data-dir ${dataDir} >/dev/null`,
);

const { api, stop } = await startBenchAgent({ dataDir, images: ['busybox'] });
const spec = { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 };

function manifest(ports) {
  const services = Object.fromEntries(
    ports.map((p, i) => [`web${i}`, { image: 'websvc', ports: [p], env: { PORT: String(p) } }]),
  );
  return Buffer.from(
    JSON.stringify({ version: '1', machine: { workspace: '/workspace' }, services }),
  ).toString('base64');
}

/** Create -> every exposed port answers 200 through its forward; returns milliseconds. */
async function up(id, ports, withServices) {
  const t0 = performance.now();
  await api('POST', '/v1/vms', {
    id,
    spec,
    manifest_inline: withServices ? manifest(ports) : manifest([]),
    startup_script: withServices
      ? '#!/bin/sh\ntrue\n'
      : '#!/bin/sh\nmkdir -p /www && echo ok > /www/index.html && httpd -p 8080 -h /www\n',
    expose: ports.map((p, i) => ({ port: p, as: `p${i}` })),
  });
  let vm;
  for (;;) {
    vm = await api('GET', `/v1/vms/${id}`);
    if (vm.state === 'running') break;
    if (vm.state !== 'creating') throw new Error(`${id}: ${vm.state}: ${vm.error}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  for (const p of vm.ports) {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${p.host_port}/index.html`, {
        signal: AbortSignal.timeout(2000),
      })
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const ms = performance.now() - t0;
  await api('DELETE', `/v1/vms/${id}`);
  return ms;
}

const m = { none: [], one: [], three: [] };
const before = uptime();
try {
  await up('warm', [8080], true); // page cache, QEMU binary, image file
  for (let i = 0; i < rounds; i++) {
    m.none.push(await up(`none-${i}`, [8080], false));
    m.one.push(await up(`one-${i}`, [8080], true));
    m.three.push(await up(`three-${i}`, [8080, 8081, 8082], true));
    loads.push(loadavg()[0]);
    process.stderr.write(`round ${i + 1}/${rounds} done\n`);
  }
} finally {
  await stop();
  rmSync(work, { recursive: true, force: true });
}
const after = uptime();

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (xs) =>
  `median ${(median(xs) / 1000).toFixed(2)} s (${xs.map((x) => (x / 1000).toFixed(2)).join(', ')})`;
console.log(`rounds: ${rounds}; uptime before: ${before}; after: ${after}`);
console.log(`load (1 min) per round: ${loads.map((l) => l.toFixed(1)).join(', ')}`);
console.log(`(a) busybox, no services, httpd from the startup script: ${fmt(m.none)}`);
console.log(`(b) one service (crun, image disk + overlay):              ${fmt(m.one)}`);
console.log(`(c) three services:                                        ${fmt(m.three)}`);
console.log(
  `overhead of the service machinery (median): one ${((median(m.one) - median(m.none)) / 1000).toFixed(2)} s, three ${((median(m.three) - median(m.none)) / 1000).toFixed(2)} s`,
);
