import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  type AgentInfo,
  AgentLogQuery,
  type AgentVm,
  CreateSnapshotRequest,
  CreateVmRequest,
  decodeManifestInline,
  ExecRequest,
  LOG_OFFSET_HEADER,
  LOG_SIZE_HEADER,
  logWindow,
  manifestServices,
} from '@orch/protocol';
import { WebSocketServer } from 'ws';

/**
 * A test double of a host agent that speaks the agent protocol (bearer token required): info, VMs,
 * exec, console (an echo that upper-cases), snapshots, pause and resume (a paused VM answers no
 * ports; a resumed one gets new host ports and its expiry moved by the paused time). VMs "boot" after `bootMs`;
 * a create that names an image together with a snapshot is refused (400), as orchd must never send
 * one. Exec does not run
 * anything: it answers `argv.join(' ')` on stdout, exit status 1 for `false`, and times out for
 * `sleep`. A VM's startup log is what a test appends with {@link FakeAgent.appendLog}, served in
 * windows as the real agent does. Counts every request, so tests can prove that nothing was dialled.
 */
/**
 * The images a fake agent reports: `debian-12`, and the service images of the test definitions
 * (`postgres` of input-cases.ts; `postgres:16` and `ghcr.io/example/api:1.4` of
 * examples/services-secrets, by their agent names), so that placement finds them.
 */
export const FAKE_AGENT_IMAGES = ['debian-12', 'postgres', 'postgres-16', 'api-1.4'] as const;

/**
 * Starts a fake agent (`info` as in {@link FakeAgent.start}) and registers it with orchd as host
 * `h1` (kind microvm) with the master token: the set-up most orchd suites share. The caller closes
 * the agent.
 */
export async function registerFakeHost(
  orchd: {
    request(
      method: string,
      path: string,
      opts: { token?: string; body?: unknown },
    ): Promise<{ status: number; body: unknown }>;
  },
  master: string,
  agentToken: string,
  info: Partial<AgentInfo> = {},
): Promise<FakeAgent> {
  const agent = await FakeAgent.start(agentToken, info);
  const reg = await orchd.request('POST', '/v1/hosts', {
    token: master,
    body: { id: 'h1', kind: 'microvm', agent_url: agent.url, agent_token: agentToken },
  });
  if (reg.status !== 201) {
    await agent.close();
    throw new Error(`registering host h1: ${reg.status} ${JSON.stringify(reg.body)}`);
  }
  return agent;
}

export class FakeAgent {
  requests = 0;
  /** When set, every request is answered with a redirect to this URL. */
  redirectTo: string | undefined;
  /** When true, `POST /v1/vms` never answers (an agent that hangs mid-create). */
  hangCreate = false;
  /** When true, `POST /v1/vms` creates the VM and then never answers (the caller times out). */
  hangAfterCreate = false;
  /** When true, `POST /v1/vms` answers the VM already `running` (an agent that boots at once). */
  createAnswersRunning = false;
  /** When set, `POST /v1/vms` is answered with this status and error envelope. */
  createFailure: { status: number; body: unknown } | undefined;
  /** When false, a live snapshot request is served as a disk snapshot (and says so). */
  supportsLive = true;
  bootMs = 50;
  /** The directories `file://` destinations must lie under (`POST /v1/destinations/check`). */
  exportRoots: string[] = ['/srv', '/x', '/full'];
  /** When set, `POST /v1/snapshots/{id}/export` fails with this agent error message (503). */
  exportFailure: string | undefined;
  /** Fetch requests received (`POST /v1/snapshots/{id}/fetch`), with the snapshot id. */
  readonly fetches: { id: string; body: { digest: string; source: Record<string, string> } }[] = [];
  /** Fetches from that kind of source fail with this status and error envelope. */
  readonly fetchFailures: {
    agent?: { status: number; body: unknown };
    export?: { status: number; body: unknown };
  } = {};
  /** How long taking a snapshot takes. */
  snapshotMs = 0;
  /** When set, pause and resume answers wait for it (a VM whose memory takes long to save). */
  pauseGate: Promise<void> | undefined;
  /** When set, exec answers wait for it (a command that runs until the test says it ended). */
  execGate: Promise<void> | undefined;
  /** Exec requests received. */
  execs = 0;
  readonly vms = new Map<string, AgentVm>();
  /** The create requests received, secrets included, for assertions. */
  readonly created: CreateVmRequest[] = [];
  readonly snapshots = new Set<string>();
  private readonly pausedAt = new Map<string, number>();
  private readonly logs = new Map<string, Buffer>();
  /** `x-request-id` of each request received, as `METHOD path id` (undefined id: none sent). */
  readonly requestIds: { method: string; path: string; id: string | undefined }[] = [];
  private nextPort = 40_000;

  private constructor(
    private readonly server: Server,
    readonly url: string,
    public token: string,
    public info: AgentInfo,
  ) {}

  static async start(token: string, info: Partial<AgentInfo> = {}): Promise<FakeAgent> {
    let agent!: FakeAgent;
    const server = createServer((req, res) => void agent.handle(req, res));
    const wss = new WebSocketServer({ noServer: true });
    server.on('upgrade', (req, socket, head) => {
      agent.requests++;
      if (req.headers.authorization !== `Bearer ${agent.token}`) {
        socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data: Buffer) => ws.send(Buffer.from(data.toString('utf8').toUpperCase())));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    agent = new FakeAgent(server, `http://127.0.0.1:${port}`, token, {
      id: `agent-${port}`,
      kind: 'microvm',
      arch: 'amd64',
      version: 'test',
      accelerator: 'tcg',
      capacity: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      free: { cpus: 8, ram_mb: 16384, disk_gb: 200 },
      images: [...FAKE_AGENT_IMAGES],
      image_details: [
        {
          name: 'debian-12',
          size_bytes: 1 << 30,
          digest: null,
          source: 'mmdebstrap:bookworm',
          created_at: '',
        },
      ],
      gpus: [],
      gpu_devices: [],
      gpu_status: null,
      ...info,
    });
    return agent;
  }

  /** Appends `text` to VM `id`'s startup log, or to its service `service`'s (as if they had written it). */
  appendLog(id: string, text: string, service?: string): void {
    const key = service === undefined ? id : `${id}/${service}`;
    this.logs.set(key, Buffer.concat([this.logs.get(key) ?? Buffer.alloc(0), Buffer.from(text)]));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.requests++;
    const rid = req.headers['x-request-id'];
    this.requestIds.push({
      method: req.method ?? '',
      path: (req.url ?? '').split('?')[0] ?? '',
      id: typeof rid === 'string' ? rid : undefined,
    });
    const send = (status: number, body?: unknown) => {
      res
        .writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' })
        .end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (this.redirectTo) return void res.writeHead(302, { location: this.redirectTo }).end();
    if (req.headers.authorization !== `Bearer ${this.token}`)
      return send(401, { error: { code: 'unauthorized', message: 'bad token' } });
    const url = new URL(req.url ?? '/', 'http://x');
    const body = await new Promise<string>((r) => {
      let b = '';
      req.on('data', (d) => (b += d));
      req.on('end', () => r(b));
    });
    const parts = url.pathname.split('/').filter(Boolean); // v1, vms, id, action
    if (req.method === 'GET' && url.pathname === '/v1/info') return send(200, this.info);
    if (parts[1] === 'vms' && parts.length === 2) {
      if (req.method === 'GET') return send(200, { vms: [...this.vms.values()] });
      if (this.hangCreate) return; // never answers
      if (this.createFailure) return send(this.createFailure.status, this.createFailure.body);
      const create = CreateVmRequest.parse(JSON.parse(body));
      this.created.push(create);
      // orchd never sends an image with a snapshot (the snapshot's disk is the root filesystem;
      // the real agent accepts only the image the snapshot descends from): held to that here.
      const from = create.restore_snapshot_id ?? create.seed_snapshot_id;
      if (from !== undefined && create.spec.image !== undefined)
        return send(400, {
          error: {
            code: 'invalid_argument',
            message: `spec.image ${create.spec.image} sent together with snapshot ${from}`,
          },
        });
      const vm: AgentVm = {
        id: create.id,
        state: 'creating',
        spec: create.spec,
        ports: create.expose.map((e) => ({ port: e.port, as: e.as, host_port: this.nextPort++ })),
        host_address: '127.0.0.1',
        accelerator: 'tcg',
        created_at: new Date().toISOString(),
        // The manifest's services, running from the start (their state machine is the guest's).
        services: manifestServices(decodeManifestInline(create.manifest_inline)).map((svc) => ({
          name: svc.name,
          image: svc.image,
          state: 'running' as const,
          restarts: 0,
          ports: [...svc.ports],
        })),
        started_at: null,
        expires_at: null,
        error: null,
        restored_from: create.restore_snapshot_id ?? null,
      };
      this.vms.set(vm.id, vm);
      const booted = setTimeout(() => {
        const now = Date.now();
        Object.assign(vm, {
          state: 'running',
          started_at: new Date(now).toISOString(),
          expires_at: new Date(now + vm.spec.max_runtime_seconds * 1000).toISOString(),
        });
      }, this.bootMs);
      booted.unref();
      if (this.createAnswersRunning) {
        clearTimeout(booted);
        const now = Date.now();
        Object.assign(vm, {
          state: 'running',
          started_at: new Date(now).toISOString(),
          expires_at: new Date(now + vm.spec.max_runtime_seconds * 1000).toISOString(),
        });
      }
      if (this.hangAfterCreate) return; // created, never answers
      return send(202, vm);
    }
    const vm = parts[1] === 'vms' ? this.vms.get(decodeURIComponent(parts[2] ?? '')) : undefined;
    if (parts[1] === 'vms' && parts.length === 3) {
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      if (req.method === 'GET') return send(200, vm);
      if (req.method === 'DELETE') {
        this.vms.delete(vm.id);
        return send(204);
      }
    }
    if (parts[1] === 'vms' && (parts[3] === 'pause' || parts[3] === 'resume') && req.method === 'POST') {
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      await this.pauseGate;
      const from = parts[3] === 'pause' ? 'running' : 'paused';
      if (vm.state !== from)
        return send(409, { error: { code: 'conflict', message: `VM ${vm.id} is ${vm.state}` } });
      // Max runtime counts running time only (as the real agent): the paused time is added.
      if (parts[3] === 'pause') {
        this.pausedAt.set(vm.id, Date.now());
        Object.assign(vm, { state: 'paused', expires_at: null, ports: [] });
      } else {
        const pausedFor = Date.now() - (this.pausedAt.get(vm.id) ?? Date.now());
        const expires = Date.parse(vm.started_at!) + vm.spec.max_runtime_seconds * 1000 + pausedFor;
        Object.assign(vm, { state: 'running', expires_at: new Date(expires).toISOString() });
        const create = this.created.find((c) => c.id === vm.id);
        vm.ports = (create?.expose ?? []).map((e) => ({
          port: e.port,
          as: e.as,
          host_port: this.nextPort++,
        }));
      }
      return send(200, vm);
    }
    if (parts[1] === 'vms' && parts[3] === 'log' && req.method === 'GET') {
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      const query = AgentLogQuery.safeParse(Object.fromEntries(url.searchParams));
      if (!query.success) return send(400, { error: { code: 'invalid_argument', message: 'bad window' } });
      const { service } = query.data;
      if (service !== undefined && !vm.services.some((s) => s.name === service))
        return send(404, { error: { code: 'not_found', message: `no service ${service}` } });
      const log = this.logs.get(service === undefined ? vm.id : `${vm.id}/${service}`) ?? Buffer.alloc(0);
      const { start, length } = logWindow(log.length, query.data);
      res.writeHead(200, {
        'content-type': 'text/plain; charset=utf-8',
        [LOG_OFFSET_HEADER]: String(start),
        [LOG_SIZE_HEADER]: String(log.length),
      });
      return void res.end(log.subarray(start, start + length));
    }
    if (parts[1] === 'vms' && parts[3] === 'exec' && req.method === 'POST') {
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      const exec = ExecRequest.parse(JSON.parse(body));
      this.execs++;
      await this.execGate;
      const timedOut = exec.argv[0] === 'sleep';
      return send(200, {
        exit_code: timedOut ? null : exec.argv[0] === 'false' ? 1 : 0,
        stdout_base64: Buffer.from(timedOut ? '' : `${exec.argv.join(' ')}\n`).toString('base64'),
        stderr_base64: Buffer.from(exec.argv[0] === 'false' ? 'failed\n' : '').toString('base64'),
        timed_out: timedOut,
        truncated: false,
        duration_ms: 1,
      });
    }
    if (parts[1] === 'vms' && parts[3] === 'snapshots' && req.method === 'POST') {
      if (!vm) return send(404, { error: { code: 'not_found', message: 'no such VM' } });
      const snap = CreateSnapshotRequest.parse(JSON.parse(body));
      await new Promise((r) => setTimeout(r, this.snapshotMs));
      this.snapshots.add(snap.snapshot_id);
      return send(201, {
        snapshot_id: snap.snapshot_id,
        vm_id: vm.id,
        kind: snap.live && this.supportsLive ? 'live' : 'disk',
        size_bytes: 4096,
        digest: createHash('sha256').update(snap.snapshot_id).digest('hex'),
        ...(snap.live && this.supportsLive
          ? { state_digest: createHash('sha256').update(`state-${snap.snapshot_id}`).digest('hex') }
          : {}),
        arch: 'amd64',
        accelerator: this.info.accelerator,
        created_at: new Date().toISOString(),
      });
    }
    if (parts[1] === 'snapshots' && parts[3] === 'fetch' && req.method === 'POST') {
      const id = decodeURIComponent(parts[2]!);
      const fetchBody = JSON.parse(body) as { digest: string; source: Record<string, string> };
      this.fetches.push({ id, body: fetchBody });
      const kind = 'export_ref' in fetchBody.source ? 'export' : 'agent';
      const failure = this.fetchFailures[kind];
      if (failure) return send(failure.status, failure.body);
      this.snapshots.add(id);
      return send(200, {
        snapshot_id: id,
        vm_id: 'env_x',
        kind: 'disk',
        size_bytes: 4096,
        digest: fetchBody.digest,
        arch: 'amd64',
        created_at: new Date().toISOString(),
      });
    }
    if (url.pathname === '/v1/destinations/check' && req.method === 'POST') {
      const { destination } = JSON.parse(body) as { destination: string };
      const path = destination.startsWith('file://') ? destination.slice('file://'.length) : undefined;
      if (path !== undefined && !this.exportRoots.some((r) => path === r || path.startsWith(`${r}/`)))
        return send(400, {
          error: {
            code: 'invalid_argument',
            message: `destination: ${destination} is not under an export root of this agent`,
            details: { field: 'destination', reason: 'outside_export_roots' },
          },
        });
      return send(200, { destination });
    }
    if (parts[1] === 'snapshots' && parts[3] === 'export' && req.method === 'POST') {
      const id = decodeURIComponent(parts[2]!);
      if (!this.snapshots.has(id))
        return send(404, { error: { code: 'not_found', message: 'no such snapshot' } });
      if (this.exportFailure)
        return send(503, { error: { code: 'unavailable', message: this.exportFailure } });
      const { destination } = JSON.parse(body) as { destination: string };
      return send(200, { export_ref: `${destination}/${id}`, files: [], duration_ms: 1 });
    }
    if (parts[1] === 'snapshots' && parts.length === 3 && req.method === 'DELETE') {
      const id = decodeURIComponent(parts[2]!);
      if (!this.snapshots.delete(id))
        return send(404, { error: { code: 'not_found', message: 'no such snapshot' } });
      return send(204);
    }
    send(404, { error: { code: 'route_not_found', message: `no route ${req.method} ${url.pathname}` } });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}
