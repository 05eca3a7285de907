import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { arch } from 'node:os';
import { type ServerType, serve } from '@hono/node-server';
import type { AgentInfo } from '@orch/protocol';
import type { Logger } from 'pino';
import manifest from '../package.json' with { type: 'json' };
import { buildApp } from './api/app.js';
import { BearerAuth } from './api/auth.js';
import { consoleUpgradeHandler } from './api/console-ws.js';
import type { Config } from './config.js';
import { ImageStore } from './images/image-store.js';
import { Layout } from './images/layout.js';
import type { KernelMeta } from './images/setup.js';
import { which } from './util/run.js';
import { type Accelerator, hostTscKhz, resolveAccelerator } from './vm/accel.js';
import { HostPorts } from './vm/host-ports.js';
import { VmManager } from './vm/vm-manager.js';

/** Version reported in /v1/info: the package's own, from its package.json. */
export const AGENT_VERSION: string = manifest.version;

/**
 * The agent process: accelerator choice, VM manager (re-reads VMs left by a previous run) and the
 * HTTP API with the console WebSocket. `run()` starts; `stop()` stops every VM and the server.
 */
export class Agent {
  private server: ServerType | undefined;
  private vms: VmManager | undefined;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  async run(): Promise<{ port: number }> {
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
    const vms = new VmManager({
      layout,
      images,
      ports: new HostPorts(config.listen),
      qemu: config.qemu,
      qemuFound,
      kernel,
      accelerator,
      tscKhz: await hostTscKhz(),
      bindAddress: config.listen,
      bootTimeoutMs: config.bootTimeoutS * 1000,
      logger,
    });
    this.vms = vms;
    await vms.recover();
    const auth = new BearerAuth(config.token);
    const info = async (): Promise<AgentInfo> => ({
      id: config.id,
      kind: config.kind,
      arch: arch() === 'arm64' ? 'arm64' : 'amd64',
      version: AGENT_VERSION,
      accelerator: config.kind === 'gpu' ? 'none' : (await qemuFound()) ? accelerator : 'none',
      ...(await vms.resources()),
      images: await images.list(),
      gpus: [],
    });
    const app = buildApp({ auth, vms, info, logger });
    const port = await new Promise<number>((resolve, reject) => {
      this.server = serve(
        { fetch: app.fetch, port: config.port, hostname: config.listen },
        (i: AddressInfo) => resolve(i.port),
      );
      this.server.once('error', reject);
    });
    this.server!.on('upgrade', consoleUpgradeHandler(auth, vms, logger));
    logger.info(
      { port, listen: config.listen, kind: config.kind, accelerator, id: config.id },
      'orch-agent listening',
    );
    return { port };
  }

  async stop(): Promise<void> {
    await this.vms?.stopAll();
    await new Promise<void>((resolve) => {
      if (!this.server) return resolve();
      this.server.close(() => resolve());
      (this.server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
    });
  }
}
