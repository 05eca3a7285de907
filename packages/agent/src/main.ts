import {
  addOptions,
  createLogger,
  createProgram,
  flagValues,
  refuseUnknownCommand,
  runMain,
} from '@support/server';
import {
  IMAGE_OPTIONS,
  loadConfig,
  loadImageConfig,
  loadSetupConfig,
  OPTIONS,
  SETUP_OPTIONS,
} from './config.js';
import { ImageStore } from './images/image-store.js';
import { Layout } from './images/layout.js';
import { importImage } from './images/oci-import.js';
import { pullImage } from './images/registry-pull.js';
import { runSetup } from './images/setup.js';
import { AGENT_VERSION, Agent } from './server.js';

/**
 * A graceful stop suspends every running VM (its memory saved, encrypted): more than the default
 * 10 s for large VMs. A second signal still forces the agent out; its VMs then keep running and the
 * next start re-adopts them.
 */
const STOP_TIMEOUT_MS = 120_000;

const progress = (m: string) => process.stdout.write(`==> ${m}\n`);

// Entry point of `orch-agent`: status 2 for configuration, 1 when it cannot start or a command
// fails, 0 after a clean stop or a command that did its work.
await runMain(
  'orch-agent',
  async (signal) => {
    const program = createProgram(
      'orch-agent',
      'The host agent: runs environments as QEMU microVMs.',
      AGENT_VERSION,
    );
    addOptions(program.allowExcessArguments(), OPTIONS).action(async (_opts, cmd) => {
      refuseUnknownCommand(cmd);
      const config = loadConfig(flagValues(cmd, OPTIONS), process.env);
      const logger = createLogger(config.logLevel, { service: 'orch-agent' });
      // Process warnings (the AWS SDK's Node version notice among them) go to the JSON log, not
      // as free text on stderr.
      process.removeAllListeners('warning');
      process.on('warning', (w) => logger.warn({ warning: w.name }, w.message));
      const agent = new Agent(config, logger, (url) =>
        process.stdout.write(`orch-agent listening on ${url}\n`),
      );
      await agent.run(signal);
    });
    addOptions(
      program.command('setup').description('fetch the kernel, build the initramfs and images (cached)'),
      SETUP_OPTIONS,
    ).action(async (_opts, cmd) => {
      const config = loadSetupConfig(flagValues(cmd, SETUP_OPTIONS), process.env);
      await runSetup(config.dataDir, progress, config.images).catch((err: Error) => {
        throw new Error(`setup: ${err.message}`, { cause: err });
      });
    });
    const image = program.command('image').description('guest images');
    addOptions(
      image
        .command('import <name> <source>')
        .description(
          'add an image; SOURCE is a rootfs tarball (.tar, .tar.gz), oci-archive:PATH[:REF], oci:DIR:TAG or docker-archive:PATH[:REF]',
        ),
      IMAGE_OPTIONS,
    ).action(async (name: string, source: string, _opts, cmd) => {
      const config = loadImageConfig(flagValues(cmd, IMAGE_OPTIONS), process.env);
      progress(`image ${name}: importing ${source}`);
      const layout = new Layout(config.dataDir);
      await importImage(new ImageStore(layout), layout, name, source).catch((err: Error) => {
        throw new Error(`image import: ${err.message}`, { cause: err });
      });
      progress(`image ${name}: ready`);
    });
    addOptions(
      image
        .command('pull <ref> [name]')
        .description(
          'pull HOST[:PORT]/NAME[:TAG|@sha256:...] from a registry with skopeo (TLS verified; AGENT_REGISTRY_*)',
        ),
      IMAGE_OPTIONS,
    ).action(async (ref: string, name: string | undefined, _opts, cmd) => {
      const config = loadImageConfig(flagValues(cmd, IMAGE_OPTIONS), process.env);
      progress(`image pull: ${ref}`);
      const layout = new Layout(config.dataDir);
      const pulled = await pullImage(new ImageStore(layout), layout, config.registry, ref, name).catch(
        (err: Error) => {
          throw new Error(`image pull: ${err.message}`, { cause: err });
        },
      );
      progress(`image ${pulled.name}: ready (from ${pulled.source})`);
    });
    await program.parseAsync(process.argv);
  },
  { stopTimeoutMs: STOP_TIMEOUT_MS },
);
