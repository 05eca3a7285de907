import { addOptions, createLogger, createProgram, flagValues, runMain } from '@support/server';
import { loadConfig, OPTIONS } from './config.js';
import { Orchestrator } from './server.js';
import { ORCHD_VERSION } from './version.js';

// Entry point of `orchd`: status 2 for configuration, 1 when it cannot start, 0 after a clean stop.
await runMain('orchd', async (signal) => {
  const program = createProgram(
    'orchd',
    'The orchestrator: HTTP API under /v1, /login and /logout, the dashboard.',
    ORCHD_VERSION,
  );
  addOptions(program, OPTIONS).action(async (_opts, cmd) => {
    const config = loadConfig(flagValues(cmd, OPTIONS), process.env);
    const logger = createLogger(config.logLevel, { service: 'orchd' });
    const orchestrator = new Orchestrator(config, logger, (url) =>
      process.stdout.write(`orchd listening on ${url}\n`),
    );
    await orchestrator.run(signal);
  });
  await program.parseAsync(process.argv);
});
