import { createProgram, refuseUnknownCommand, runMain } from '@support/server';
import type { Command } from 'commander';
import { addBoardCommands, rawOptions, withConfigOptions } from './commands/board-commands.js';
import { addTokenCommands } from './commands/token-commands.js';
import { loadConfig } from './config.js';
import { BoardError } from './errors.js';
import { startBoardNode } from './node.js';
import { BOARD_NODE_VERSION } from './version.js';

/** The command line; `signal` aborts on SIGINT/SIGTERM (see `runMain`). */
function program(signal: AbortSignal): Command {
  const program = createProgram(
    'board-node',
    'The board data service node: POST /rpc/<procedure>, GET /watch, GET /health',
    BOARD_NODE_VERSION,
  );
  withConfigOptions(program.allowExcessArguments()).action(async (_opts, cmd: Command) => {
    refuseUnknownCommand(cmd);
    const config = loadConfig(rawOptions(cmd));
    const node = await startBoardNode(config, { signal });
    process.stdout.write(
      `board-node ${config.nodeId} listening on ${node.url} (${node.store.kind} store, version ${BOARD_NODE_VERSION})\n`,
    );
    await node.stopped;
  });
  addBoardCommands(program);
  addTokenCommands(program);
  return program;
}

// Status 2 for configuration, 1 when the node cannot start or a command fails, 0 otherwise.
await runMain('board-node', (signal) => program(signal).parseAsync(process.argv), {
  describeError: (err) => (err instanceof BoardError ? `${err._tag}: ${err.message}` : undefined),
});
