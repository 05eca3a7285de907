import { readFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { arch } from 'node:os';
import { getRequestListener } from '@hono/node-server';
import type { AgentInfo, ErrorBody } from '@orch/protocol';
import {
  closeServer,
  createHttpServer,
  type Logger,
  listen,
  listenUrl,
  type Service,
  type Startable,
  serveUntilAborted,
} from '@support/server';
import manifest from '../package.json' with { type: 'json' };
import { buildApp } from './api/app.js';
import { BearerAuth } from './api/auth.js';
import { consoleUpgradeHandler } from './api/console-ws.js';
import type { Config } from './config.js';
import { GpuManager } from './gpu/gpu-manager.js';
import { ImageStore } from './images/image-store.js';
import { Layout } from './images/layout.js';
import type { KernelMeta } from './images/setup.js';
import { AgentMetrics } from './metrics.js';
import { installIsolation } from './net/isolation.js';
import { groupId, VmUsers } from './net/vm-users.js';
import { ArtifactTransfer } from './transfer/artifact-transfer.js';
import { ExportRoots } from './transfer/export-roots.js';
import { run, which } from './util/run.js';
import { type Accelerator, hostTscKhz, resolveAccelerator } from './vm/accel.js';
import { HostPorts } from './vm/host-ports.js';
import { VmManager } from './vm/vm-manager.js';

/** Version reported in /v1/info: the package's own, from its package.json. */
export const AGENT_VERSION: string = manifest.version;

/** The envelope of requests too malformed for any route (parser refusals, bad Host, `OPTIONS *`). */
const malformed = (message: string): ErrorBody => ({ error: { code: 'invalid_argument', message } });

/**
 * The agent process as a service: accelerator choice, VM manager (re-reads VMs left by a previous
 * run) and the HTTP API with the console WebSocket. `run(signal)` starts, calls `onListening`,
 * and when the signal aborts stops every VM and the server.
 */
export class Agent implements Service, Startable {
  readonly name = 'orch-agent';
  private server: Server | undefined;
  private vms: VmManager | undefined;
  private readonly watching = new AbortController();

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly onListening: (url: string) => void = () => undefined,
  ) {}

  run(signal: AbortSignal): Promise<void> {
    return serveUntilAborted(signal, this, this.onListening);
  }

  /** Starts everything; resolves with the URL it serves once requests are served. */
  async start(): Promise<string> {
    const { config, logger } = this;
    const layout = new Layout(config.dataDir);
    const images = new ImageStore(layout);
    const kernel = async (): Promise<KernelMeta | undefined> => {
      try {
        return JSON.parse(await readFile(layout.kernelMeta, 'utf8')) as KernelMeta;
      } catch {
        return undefined;
      }
    };
    let qemuPath: string | undefined;
    const qemuFound = async () => {
      qemuPath ??= await which(config.qemu);
      return !!qemuPath;
    };
    const hasQemu = await qemuFound();
    if (!hasQemu)
      logger.warn(
        { qemu: config.qemu },
        'QEMU is not installed: VMs cannot be created (run orch-agent setup)',
      );
    const k = await kernel();
    if (!k) logger.warn({ dataDir: layout.root }, 'no guest kernel: run orch-agent setup');
    const accelerator: Accelerator = hasQemu
      ? await resolveAccelerator(config.accel, { layout, qemu: config.qemu, kernel: k?.kernel, logger })
      : 'tcg';
    const metrics = new AgentMetrics();
    const isolation = await installIsolation(config, { root: layout.root, vmsDir: layout.vmsDir }, logger);
    const users =
      isolation.mode === 'on'
        ? new VmUsers(config.vmUids, accelerator === 'kvm' ? await groupId('kvm') : undefined)
        : undefined;
    // A GPU host detects its GPUs at every /v1/info and passes whole GPUs to VMs (gpu/).
    const gpus =
      config.kind === 'gpu'
        ? new GpuManager({
            nvidiaSmi: config.nvidiaSmi,
            sysfs: config.sysfsRoot,
            accelerator: hasQemu ? accelerator : 'none',
            dataDir: layout.root,
            logger,
          })
        : undefined;
    let qemuVersion: Promise<string> | undefined;
    const vms = new VmManager({
      qemuVersion: () => {
        qemuVersion ??= run([config.qemu, '--version']).then(
          (out) => out.split('\n')[0]?.trim() ?? '',
          () => '',
        );
        return qemuVersion;
      },
      layout,
      images,
      ports: new HostPorts(config.host),
      qemu: config.qemu,
      qemuFound,
      kernel,
      accelerator,
      tscKhz: await hostTscKhz(),
      bindAddress: config.host,
      bootTimeoutMs: config.bootTimeoutSec * 1000,
      isolation,
      users,
      startupLogBytes: config.startupLogMb * 2 ** 20,
      stateSecret: config.token,
      logger,
      metrics,
      ...(gpus ? { gpus } : {}),
    });
    this.vms = vms;
    await vms.recover();
    // GPUs bound for VMs that did not come back are given back to the host driver.
    await gpus?.recover((id) => vms.list().some((v) => v.id === id && v.state === 'running'));
    vms.services.watch(this.watching.signal);
    const auth = new BearerAuth(config.token);
    const info = async (): Promise<AgentInfo> => ({
      id: config.id,
      kind: config.kind,
      arch: arch() === 'arm64' ? 'arm64' : 'amd64',
      version: AGENT_VERSION,
      accelerator: (await qemuFound()) ? accelerator : 'none',
      ...(await vms.resources()),
      images: await images.list(),
      image_details: await images.describe(),
      ...(gpus ? await gpus.info() : { gpus: [], gpu_devices: [], gpu_status: null }),
      network_isolation: {
        mode: isolation.mode,
        active: isolation.active,
        ...(isolation.reason ? { reason: isolation.reason } : {}),
      },
    });
    metrics.watch({
      list: () => vms.list(),
      accelerator: hasQemu ? accelerator : 'none',
      dataDir: layout.root,
    });
    const roots = new ExportRoots(config.exportRoots);
    await roots.ensure();
    const transfer = new ArtifactTransfer({
      layout,
      snapshots: vms.snapshots,
      s3: {
        endpoint: config.s3Endpoint,
        region: config.s3Region,
        accessKeyId: config.s3AccessKeyId,
        secretAccessKey: config.s3SecretAccessKey,
        forcePathStyle: config.s3ForcePathStyle,
        partSizeBytes: config.s3PartSizeMb * 2 ** 20,
      },
      roots,
      logger,
    });
    const app = buildApp({ auth, vms, transfer, info, logger, metrics });
    this.server = createHttpServer(getRequestListener(app.fetch, { hostname: config.host }), {
      envelope: malformed,
      upgrade: consoleUpgradeHandler(auth, vms, logger),
    });
    const port = await listen(this.server, config.port, config.host);
    logger.info(
      { port, host: config.host, kind: config.kind, accelerator, id: config.id, version: AGENT_VERSION },
      'orch-agent listening',
    );
    return listenUrl(config.host, port);
  }

  /** Stops what started (also after a partial start). */
  async stop(): Promise<void> {
    this.logger.info('orch-agent stopping');
    this.watching.abort();
    await this.vms?.stopAll();
    if (this.server) await closeServer(this.server);
  }
}
