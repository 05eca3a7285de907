import { pino } from 'pino';
import { ConfigError, helpText, loadConfig } from './config.js';
import { ImageStore } from './images/image-store.js';
import { Layout } from './images/layout.js';
import { runSetup } from './images/setup.js';
import { Agent } from './server.js';

/** Entry point of `orch-agent`: the only place that prints to the terminal and sets the exit status. */
async function main(): Promise<number> {
  let invocation: ReturnType<typeof loadConfig>;
  try {
    invocation = loadConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`orch-agent: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const progress = (m: string) => process.stdout.write(`==> ${m}\n`);
  switch (invocation.command) {
    case 'help':
      process.stdout.write(helpText());
      return 0;
    case 'setup':
      try {
        await runSetup(invocation.config.dataDir, progress);
        return 0;
      } catch (err) {
        process.stderr.write(`orch-agent setup: ${(err as Error).message}\n`);
        return 1;
      }
    case 'image-import':
      try {
        progress(`image ${invocation.name}: importing ${invocation.tarball}`);
        await new ImageStore(new Layout(invocation.config.dataDir)).importTarball(
          invocation.name,
          invocation.tarball,
        );
        progress(`image ${invocation.name}: ready`);
        return 0;
      } catch (err) {
        process.stderr.write(`orch-agent image import: ${(err as Error).message}\n`);
        return 1;
      }
    case 'serve':
      break;
  }
  const logger = pino({ level: invocation.config.logLevel, base: { service: 'orch-agent' } });
  const stopRequested = new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  const agent = new Agent(invocation.config, logger);
  try {
    await agent.run();
  } catch (err) {
    process.stderr.write(`orch-agent: cannot start: ${(err as Error).message}\n`);
    await agent.stop().catch(() => undefined);
    return 1;
  }
  await stopRequested;
  logger.info('orch-agent stopping');
  await agent.stop();
  return 0;
}

process.exitCode = await main();
setTimeout(() => process.exit(), 5000).unref();
