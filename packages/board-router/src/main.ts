import { Command, Option } from 'commander';
import { ConfigError, loadConfig, optionDeclarations, type RawOptions } from './config.js';
import { startBoardRouter } from './router.js';

const program = new Command('board-router')
  .description(
    'Router in front of board-node processes: POST /rpc/<procedure> with hedging and failover, GET /watch (proxied from one node), GET /health, GET /metrics',
  )
  .showHelpAfterError();
for (const d of optionDeclarations()) program.addOption(new Option(d.flag, d.description));
program.action(async (_opts, cmd: Command) => {
  const config = loadConfig(cmd.opts() as RawOptions);
  const router = await startBoardRouter(config);
  let stopping = false;
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    void router.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.stdout.write(`board-router listening on ${router.url} (${config.nodes.length} nodes)\n`);
});

// The one place that prints errors and sets the exit code.
program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`board-router: configuration: ${err.message}\n`);
  else process.stderr.write(`board-router: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
