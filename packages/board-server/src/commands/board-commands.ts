import type { ColumnDef } from '@board/protocol';
import { addOptions, flagValues } from '@support/server';
import type { Command } from 'commander';
import { boardAdmin } from '../boards/board-admin.js';
import { parseColumnSpec } from '../boards/columns.js';
import { loadConfig, OPTIONS, type RawOptions } from '../config.js';
import { createLogger } from '../log.js';
import { openStore } from '../store/database.js';

/** Adds every declared option (flag, description with its env name) to a command. */
export function withConfigOptions(cmd: Command): Command {
  return addOptions(cmd, OPTIONS);
}

/** The declared options given as flags to `cmd` (or its parents). */
export function rawOptions(cmd: Command): RawOptions {
  return flagValues(cmd, OPTIONS);
}

/** Runs `fn` with the board admin over a store opened for the command, closed afterwards. */
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

/** `board-node board create | add-column | list | drop`: operator commands on boards. */
export function addBoardCommands(program: Command): void {
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
}
