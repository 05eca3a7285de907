import { type ColumnDef, VERBS, type Verb } from '@board/protocol';
import {
  addOptions,
  ConfigError,
  createProgram,
  flagValues,
  refuseUnknownCommand,
  runMain,
} from '@support/server';
import type { Command } from 'commander';
import { mintToken, parseTtl } from './auth/tokens.js';
import { boardAdmin } from './boards/board-admin.js';
import { parseColumnSpec } from './boards/columns.js';
import { loadConfig, OPTIONS, type RawOptions } from './config.js';
import { BoardError, boardError } from './errors.js';
import { createLogger } from './log.js';
import { startBoardNode } from './node.js';
import { openStore } from './store/database.js';

/** Adds every declared option (flag, description with its env name) to a command. */
function withConfigOptions(cmd: Command): Command {
  return addOptions(cmd, OPTIONS);
}

function rawOptions(cmd: Command): RawOptions {
  return flagValues(cmd, OPTIONS);
}

async function withAdmin<T>(
  cmd: Command,
  fn: (admin: ReturnType<typeof boardAdmin>) => Promise<T>,
): Promise<T> {
  const config = loadConfig({ auth: 'off', ...rawOptions(cmd) });
  const log = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel);
  const store = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    log,
    poolSize: 2,
  });
  try {
    return await fn(boardAdmin(store));
  } finally {
    await store.close();
  }
}

function printBoard(b: { id: string; columns: ColumnDef[]; head: number }): void {
  const cols = [
    'id:TEXT',
    'updated_at:TIMESTAMP',
    'state:TEXT',
    ...b.columns.map((c) => `${c.name}:${c.type}`),
  ];
  process.stdout.write(`${b.id}\twatermark ${b.head}\t${cols.join(' ')}\n`);
}

/** The command line; `signal` aborts on SIGINT/SIGTERM (see `runMain`). */
function program(signal: AbortSignal): Command {
  const program = createProgram(
    'board-node',
    'The board data service node: POST /rpc/<procedure>, GET /watch, GET /health',
  );
  withConfigOptions(program.allowExcessArguments()).action(async (_opts, cmd: Command) => {
    refuseUnknownCommand(cmd);
    const config = loadConfig(rawOptions(cmd));
    const node = await startBoardNode(config, { signal });
    process.stdout.write(`board-node ${config.nodeId} listening on ${node.url} (${node.store.kind} store)\n`);
    await node.stopped;
  });

  const board = program.command('board').description('operator commands on boards');
  withConfigOptions(board.command('create <id>'))
    .description('create a board: base columns id, updated_at, state plus --column name:TYPE ...')
    .option('--column <name:TYPE...>', 'user column (TYPE: TEXT, INTEGER, DOUBLE, BOOLEAN, TIMESTAMP)', [])
    .option('--if-not-exists', 'succeed if the board already exists')
    .action(async (id: string, opts: { column: string[]; ifNotExists?: boolean }, cmd: Command) => {
      const columns = opts.column.map(parseColumnSpec);
      printBoard(
        await withAdmin(cmd, (a) => a.create(id, columns, { ifNotExists: opts.ifNotExists === true })),
      );
    });
  withConfigOptions(board.command('add-column <id> <column>'))
    .description('add a user column (name:TYPE) to a board')
    .action(async (id: string, column: string, _o, cmd: Command) => {
      printBoard(await withAdmin(cmd, (a) => a.addColumn(id, parseColumnSpec(column))));
    });
  withConfigOptions(board.command('list'))
    .description('list boards with their columns and watermarks')
    .action(async (_o, cmd: Command) => {
      for (const b of await withAdmin(cmd, (a) => a.list())) printBoard(b);
    });
  withConfigOptions(board.command('drop <id>'))
    .description('drop a board with its rows and change log')
    .action(async (id: string, _o, cmd: Command) => {
      await withAdmin(cmd, (a) => a.drop(id));
      process.stdout.write(`dropped ${id}\n`);
    });

  const token = program.command('token').description('capability tokens');
  withConfigOptions(token.command('mint'))
    .description('print a capability token (HS256 JWT signed with BOARD_TOKEN_SECRET)')
    .requiredOption('--board <id...>', 'board id(s) the verbs apply to (* for every board)')
    .option('--verbs <list>', `comma-separated verbs (${VERBS.join(', ')})`, 'read')
    .option('--ttl <duration>', 'lifetime, e.g. 90s, 15m, 1h, 7d', '1h')
    .option('--pin', 'pin the token to its single board (no x-data-board header needed)')
    .option('--subject <name>', 'actor name recorded on change records')
    .action(
      async (
        opts: { board: string[]; verbs: string; ttl: string; pin?: boolean; subject?: string },
        cmd: Command,
      ) => {
        const config = loadConfig({ auth: 'off', ...rawOptions(cmd) });
        if (config.tokenSecret === undefined)
          throw new ConfigError('BOARD_TOKEN_SECRET (--token-secret): required to mint tokens');
        const verbs = opts.verbs.split(',').map((v) => v.trim());
        for (const v of verbs) {
          if (!(VERBS as readonly string[]).includes(v))
            throw boardError('InvalidInput', `unknown verb "${v}"`);
        }
        const jwt = await mintToken(config.tokenSecret, {
          boards: opts.board,
          verbs: verbs as Verb[],
          ttlSec: parseTtl(opts.ttl),
          pin: opts.pin === true,
          ...(opts.subject !== undefined ? { subject: opts.subject } : {}),
        });
        process.stdout.write(`${jwt}\n`);
      },
    );

  return program;
}

// The one place that prints errors and sets the exit code.
await runMain('board-node', (signal) => program(signal).parseAsync(process.argv), {
  describeError: (err) => (err instanceof BoardError ? `${err.tag}: ${err.message}` : undefined),
});
