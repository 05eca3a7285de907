// A fleet of fake host agents for orchd benchmarks: a test double that speaks the agent protocol
// (like the S3 double of the travel tests), one HTTP server per host on loopback. VMs "run" at
// once (a create answers `running`), so a benchmark measures the control plane and nothing else.
// Each host offers `cpus` CPUs and refuses a create past them (409), so an overbooking orchd is
// caught by the host as well as by the count of VMs.
import { createServer } from 'node:http';

const EMPTY = { cpus: 0, ram_mb: 0, disk_gb: 0 };

/** One fake host: `{ url, vms, refused, close }`. */
export async function startFakeHost({ token, id, cpus = 4, ramMb = 16384, diskGb = 200 }) {
  const vms = new Map();
  const host = { vms, refused: 0 };
  const capacity = { cpus, ram_mb: ramMb, disk_gb: diskGb };
  const used = () =>
    [...vms.values()].reduce(
      (u, vm) => ({
        cpus: u.cpus + vm.spec.cpus,
        ram_mb: u.ram_mb + vm.spec.ram_mb,
        disk_gb: u.disk_gb + vm.spec.storage_gb,
      }),
      EMPTY,
    );
  const server = createServer((req, res) => {
    const send = (status, value) =>
      res
        .writeHead(status, value === undefined ? {} : { 'content-type': 'application/json' })
        .end(value === undefined ? undefined : JSON.stringify(value));
    if (req.headers.authorization !== `Bearer ${token}`)
      return send(401, { error: { code: 'unauthorized', message: 'bad token' } });
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === '/v1/info') {
        const u = used();
        return send(200, {
          id,
          kind: 'microvm',
          arch: 'amd64',
          version: 'fake',
          accelerator: 'tcg',
          capacity,
          free: { cpus: cpus - u.cpus, ram_mb: ramMb - u.ram_mb, disk_gb: diskGb - u.disk_gb },
          images: [],
          image_details: [],
          gpus: [],
        });
      }
      if (path === '/v1/vms' && req.method === 'GET') return send(200, { vms: [...vms.values()] });
      if (path === '/v1/vms' && req.method === 'POST') {
        const r = JSON.parse(body);
        if (used().cpus + r.spec.cpus > cpus) {
          host.refused++;
          return send(409, { error: { code: 'conflict', message: `host ${id} is full` } });
        }
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
          expires_at: new Date(Date.now() + r.spec.max_runtime_seconds * 1000).toISOString(),
          error: null,
          restored_from: null,
          services: [],
        };
        vms.set(vm.id, vm);
        return send(202, vm);
      }
      const vm = vms.get(decodeURIComponent(path.split('/')[3] ?? ''));
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      if (req.method === 'GET') return send(200, vm);
      if (req.method === 'DELETE') {
        vms.delete(vm.id);
        return send(204);
      }
      send(404, { error: { code: 'route_not_found', message: 'no route' } });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  host.url = `http://127.0.0.1:${server.address().port}`;
  host.close = () => {
    server.closeAllConnections();
    return new Promise((r) => server.close(r));
  };
  return host;
}
