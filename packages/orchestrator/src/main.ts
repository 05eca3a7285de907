import { pino } from 'pino';
import { ConfigError, helpText, loadConfig } from './config.js';
import { Orchestrator } from './server.js';

/** Entry point of `orchd`: the only place that prints to the terminal and sets the exit status. */
async function main(): Promise<number> {
  let invocation: ReturnType<typeof loadConfig>;
  try {
    invocation = loadConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`orchd: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (invocation.help) {
    process.stdout.write(helpText());
    return 0;
  }
  const logger = pino({ level: invocation.config.logLevel, base: { service: 'orchd' } });
  // Listen for signals before starting, so that one arriving during start-up still stops cleanly.
  const stopRequested = new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  const orchestrator = new Orchestrator(invocation.config, logger);
  try {
    await orchestrator.run();
  } catch (err) {
    process.stderr.write(`orchd: cannot start: ${(err as Error).message}\n`);
    await orchestrator.stop().catch(() => undefined);
    return 1;
  }
  await stopRequested;
  logger.info('orchd stopping');
  await orchestrator.stop();
  return 0;
}

process.exitCode = await main();
// Nothing should keep running after a clean stop; make sure of it.
setTimeout(() => process.exit(), 2000).unref();
