import { healthSchema, isBoardId } from '@board/protocol';
import { BoardClient, type Shared } from './board-client.js';
import { BoardError } from './errors.js';
import type { TransportConfig } from './transport.js';
import type { ConnectOptions, UserColumns } from './types.js';

/** What {@link connect} returns: the only way to get a board client. */
export interface Connection<S = UserColumns> {
  /**
   * A client for one board. The id is validated like the server does (`^[A-Za-z0-9_]{1,64}$`);
   * an invalid id throws a {@link BoardError} with tag `InvalidBoardId` (a programming error, no
   * request is made). The user-column type defaults to the connection's.
   *
   * @example
   * const tasks = connect({ url }).board<{ title: string | null }>('tasks');
   */
  board<U = S>(boardId: string): BoardClient<U>;
}

/**
 * Connects to a board-node or board-router. No request is made until a board client is used.
 *
 * @example
 * interface Tasks { title: string | null; points: number | null }
 * const conn = connect<Tasks>({ url: 'http://127.0.0.1:8787', token: process.env.BOARD_TOKEN });
 * const tasks = conn.board('tasks');
 * const r = await tasks.insert({ id: 't1', title: 'write docs' });
 */
export function connect<S = UserColumns>(options: ConnectOptions): Connection<S> {
  const config: TransportConfig = {
    url: options.url.replace(/\/+$/, ''),
    token: options.token,
    timeoutMs: options.timeoutMs ?? 10_000,
    retry: options.retry ?? { times: 2, delayMs: 50 },
    fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
  };
  let nodeId: Promise<string | undefined> | undefined;
  const shared: Shared = {
    config,
    nodeId() {
      nodeId ??= (async () => {
        try {
          const res = await config.fetch(`${config.url}/health`, {
            signal: AbortSignal.timeout(config.timeoutMs),
          });
          const health = healthSchema.safeParse(await res.json());
          return health.success ? health.data.nodeId : undefined;
        } catch {
          nodeId = undefined;
          return undefined;
        }
      })();
      return nodeId;
    },
    forgetNodeId() {
      nodeId = undefined;
    },
  };
  return {
    board<U = S>(boardId: string): BoardClient<U> {
      if (typeof boardId !== 'string' || !isBoardId(boardId)) {
        throw new BoardError(
          'InvalidBoardId',
          `board id must be 1 to 64 characters of A-Za-z0-9_: ${String(boardId).slice(0, 80)}`,
        );
      }
      return new BoardClient<U>(boardId, shared, undefined);
    },
  };
}
