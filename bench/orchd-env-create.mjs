// Control-plane overhead of `POST /v1/environments`: p50 and p99 over 200 creates through orchd
// (auth, validation, placement under the cluster lock, record, sealed secrets, agent call), against
// an agent that answers at once, side by side with the same create sent straight to that agent.
//
//   node bench/orchd-env-create.mjs [creates]     (default 200)
import { createServer } from 'node:http';
import { startOrchd } from './lib/orchd.mjs';

const N = Number(process.argv[2] ?? 200);
const TOKEN = 'bench-master';
const AGENT_TOKEN = 'bench-agent';

const vms = new Map();
const agent = createServer((req, res) => {
  if (req.headers.authorization !== `Bearer ${AGENT_TOKEN}`) return res.writeHead(401).end();
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    const json = (status, value) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (req.url === '/v1/info') {
      const big = { cpus: 100_000, ram_mb: 1 << 30, disk_gb: 1 << 30 };
      return json(200, {
        id: 'bench',
        kind: 'microvm',
        arch: 'amd64',
        version: 'b',
        accelerator: 'tcg',
        capacity: big,
        free: big,
        images: [],
        gpus: [],
      });
    }
    if (req.method === 'POST' && req.url === '/v1/vms') {
      const r = JSON.parse(body);
      const now = new Date().toISOString();
      const vm = {
        id: r.id,
        state: 'running',
        spec: r.spec,
        ports: [],
        host_address: '127.0.0.1',
        accelerator: 'tcg',
        created_at: now,
        started_at: now,
        expires_at: null,
        error: null,
        restored_from: null,
      };
      vms.set(vm.id, vm);
      return json(202, vm);
    }
    if (req.method === 'GET' && req.url === '/v1/vms') return json(200, { vms: [...vms.values()] });
    const vm = vms.get(decodeURIComponent(req.url.split('/')[3] ?? ''));
    if (req.method === 'GET' && vm) return json(200, vm);
    json(404, { error: { code: 'not_found', message: 'no' } });
  });
});
await new Promise((r) => agent.listen(0, '127.0.0.1', r));
const agentUrl = `http://127.0.0.1:${agent.address().port}`;

const orchd = await startOrchd({ ORCH_AUTH_TOKEN: TOKEN });
const base = orchd.url;
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const reg = await fetch(`${base}/v1/hosts`, {
  method: 'POST',
  headers,
  body: JSON.stringify({ kind: 'microvm', agent_url: agentUrl, agent_token: AGENT_TOKEN }),
});
if (reg.status !== 201) throw new Error(`register: ${reg.status} ${await reg.text()}`);

const request = {
  task_id: 'bench',
  spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
  manifest_inline: Buffer.from('{"version":"1","machine":{"workspace":"/workspace"},"services":{}}').toString(
    'base64',
  ),
  secrets: {},
  startup_script: '#!/bin/sh\n',
  expose: [],
};
const timed = async (fn) => {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
};
const viaOrchd = [];
const direct = [];
for (let i = 0; i < N + 10; i++) {
  const a = await timed(async () => {
    const r = await fetch(`${base}/v1/environments`, {
      method: 'POST',
      headers,
      body: JSON.stringify(request),
    });
    if (r.status !== 201) throw new Error(`create: ${r.status} ${await r.text()}`);
  });
  const b = await timed(async () => {
    const r = await fetch(`${agentUrl}/v1/vms`, {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: `direct-${i}`, ...request, secrets: { ORCH_VM_SECRET: 'x' } }),
    });
    await r.text();
  });
  if (i >= 10) {
    viaOrchd.push(a);
    direct.push(b);
  }
}
const pct = (xs, p) =>
  [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
console.log(`POST /v1/environments, ${N} sequential creates (after 10 warm-up), agent answers at once`);
for (const p of [50, 99]) {
  const o = pct(viaOrchd, p);
  const d = pct(direct, p);
  console.log(
    `p${p}: through orchd ${o.toFixed(2)} ms, straight to the agent ${d.toFixed(2)} ms, orchd overhead ${(o - d).toFixed(2)} ms, ratio ${(o / d).toFixed(1)}x`,
  );
}
await orchd.stop();
agent.close();
