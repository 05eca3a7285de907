// Requests per second of `GET /v1/hosts/{id}` with a bearer token on a real orchd (embedded store),
// against a bare node:http server answering the same JSON, measured side by side in one run with
// autocannon (keep-alive, 20 connections). Needs `npm run build` (done by npm install / npm test).
//
//   node bench/orchd-host-read.mjs [seconds]     (default 10)
import { createServer } from 'node:http';
import autocannon from 'autocannon';
import { startOrchd } from './lib/orchd.mjs';

const seconds = Number(process.argv[2] ?? 10);
const TOKEN = 'bench-master-token';
const AGENT_TOKEN = 'bench-agent-token';

// A minimal agent so that orchd has a real host to read.
const agent = createServer((req, res) => {
  if (req.headers.authorization !== `Bearer ${AGENT_TOKEN}`) return res.writeHead(401).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(
    JSON.stringify({
      id: 'bench-host',
      kind: 'microvm',
      arch: 'amd64',
      version: 'bench',
      accelerator: 'tcg',
      capacity: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      free: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      images: ['debian-12'],
      gpus: [],
    }),
  );
});
await new Promise((r) => agent.listen(0, '127.0.0.1', r));

const orchd = await startOrchd({ ORCH_AUTH_TOKEN: TOKEN });
const base = orchd.url;
const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const reg = await fetch(`${base}/v1/hosts`, {
  method: 'POST',
  headers: auth,
  body: JSON.stringify({
    kind: 'microvm',
    agent_url: `http://127.0.0.1:${agent.address().port}`,
    agent_token: AGENT_TOKEN,
  }),
});
if (reg.status !== 201) throw new Error(`registration failed: ${reg.status} ${await reg.text()}`);
const body = await (await fetch(`${base}/v1/hosts/bench-host`, { headers: auth })).text();

// The obvious alternative: node:http answering the same bytes, no routing, auth or store.
const bare = createServer((_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(body),
);
await new Promise((r) => bare.listen(0, '127.0.0.1', r));

const run = (url) =>
  autocannon({ url, connections: 20, duration: seconds, headers: { authorization: `Bearer ${TOKEN}` } });
const orchdResult = await run(`${base}/v1/hosts/bench-host`);
const bareResult = await run(`http://127.0.0.1:${bare.address().port}/v1/hosts/bench-host`);

const row = (name, r) =>
  `${name.padEnd(34)} ${r.requests.average.toFixed(0).padStart(8)} req/s   p50 ${r.latency.p50} ms   p99 ${r.latency.p99} ms   non-2xx ${r.non2xx}`;
console.log(`GET /v1/hosts/{id}, ${seconds} s each, 20 connections, keep-alive`);
console.log(row('orchd (bearer, Postgres read)', orchdResult));
console.log(row('bare node:http (same JSON)', bareResult));
console.log(`orchd / bare = ${(orchdResult.requests.average / bareResult.requests.average).toFixed(3)}`);

await orchd.stop();
agent.close();
bare.close();
