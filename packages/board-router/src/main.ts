import { addOptions, createProgram, flagValues, runMain, untilAborted } from '@support/server';
import { loadConfig, OPTIONS } from './config.js';
import { startBoardRouter } from './router.js';
import { BOARD_ROUTER_VERSION } from './version.js';

await runMain('board-router', async (signal) => {
  const program = createProgram(
    'board-router',
    'Router in front of board-node processes: POST /rpc/<procedure> with hedging and failover, GET /watch (proxied from one node), GET /health, GET /metrics',
    BOARD_ROUTER_VERSION,
  );
  addOptions(program, OPTIONS).action(async (_opts, cmd) => {
    const config = loadConfig(flagValues(cmd, OPTIONS));
    const router = await startBoardRouter(config);
    process.stdout.write(`board-router listening on ${router.url} (${config.nodes.length} nodes)\n`);
    await untilAborted(signal);
    await router.stop();
  });
  await program.parseAsync(process.argv);
});
