import {
  addOptions,
  createLogger,
  createProgram,
  flagValues,
  refuseUnknownCommand,
  runMain,
} from '@support/server';
import { loadConfig, loadSetupConfig, OPTIONS, SETUP_OPTIONS } from './config.js';
import { ImageStore } from './images/image-store.js';
import { Layout } from './images/layout.js';
import { runSetup } from './images/setup.js';
import { Agent } from './server.js';

const progress = (m: string) => process.stdout.write(`==> ${m}\n`);

// Entry point of `orch-agent`: status 2 for configuration, 1 when it cannot start or a command
// fails, 0 after a clean stop or a command that did its work.
await runMain('orch-agent', async (signal) => {
  const program = createProgram('orch-agent', 'The host agent: runs environments as QEMU microVMs.');
  addOptions(program.allowExcessArguments(), OPTIONS).action(async (_opts, cmd) => {
    refuseUnknownCommand(cmd);
    const config = loadConfig(flagValues(cmd, OPTIONS), process.env);
    const logger = createLogger(config.logLevel, { service: 'orch-agent' });
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
    await runSetup(config.dataDir, progress).catch((err: Error) => {
      throw new Error(`setup: ${err.message}`, { cause: err });
    });
  });
  const image = program.command('image').description('guest images');
  addOptions(
    image
      .command('import <name> <rootfs>')
      .description('add an image from a root filesystem tarball (ROOTFS.tar or .tar.gz)'),
    SETUP_OPTIONS,
  ).action(async (name: string, tarball: string, _opts, cmd) => {
    const config = loadSetupConfig(flagValues(cmd, SETUP_OPTIONS), process.env);
    progress(`image ${name}: importing ${tarball}`);
    await new ImageStore(new Layout(config.dataDir)).importTarball(name, tarball).catch((err: Error) => {
      throw new Error(`image import: ${err.message}`, { cause: err });
    });
    progress(`image ${name}: ready`);
  });
  await program.parseAsync(process.argv);
});
