import { VERBS, type Verb } from '@board/protocol';
import { ConfigError } from '@support/server';
import type { Command } from 'commander';
import { mintToken, parseTtl } from '../auth/tokens.js';
import { loadConfig } from '../config.js';
import { boardError } from '../errors.js';
import { rawOptions, withConfigOptions } from './board-commands.js';

/** `board-node token mint`: prints a capability token signed with the configured secret. */
export function addTokenCommands(program: Command): void {
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
}
