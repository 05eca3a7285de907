import type { IncomingHttpHeaders } from 'node:http';
import { claimsAllow, HEADERS, isBoardId, type TokenClaims, type Verb } from '@board/protocol';
import { boardError } from '../errors.js';
import { verifyToken } from './tokens.js';

/** Who is asking, on which board, until when. */
export interface RequestScope {
  board: string;
  claims: TokenClaims | undefined;
  /** Token expiry in ms since the epoch (undefined with auth off). */
  expiresAt: number | undefined;
  actor: string | undefined;
}

/**
 * Resolves and authorises the target board of a request, in the order of the spec's Errors table:
 * token (401 `Unauthenticated`), board from `x-data-board` or the pinning claim (401
 * `MissingBoardEnvelope`, 400 `InvalidBoardId`), verb on that board (403 `Forbidden`).
 */
export async function authorize(
  headers: IncomingHttpHeaders,
  verb: Verb,
  auth: { on: boolean; secret: string | undefined },
): Promise<RequestScope> {
  let claims: TokenClaims | undefined;
  if (auth.on) {
    const header = headers.authorization ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m?.[1] || auth.secret === undefined) throw boardError('Unauthenticated', 'missing bearer token');
    claims = await verifyToken(auth.secret, m[1]);
  }
  // Node joins a repeated header's values with ", " (only set-cookie is a list), which no board id
  // contains: a repeated header is refused as an invalid id.
  const header = headers[HEADERS.board] as string | undefined;
  const board = header ?? claims?.pin;
  if (board === undefined || board === '') {
    throw boardError(
      'MissingBoardEnvelope',
      `no ${HEADERS.board} header${auth.on ? ' and the token does not pin a board' : ''}`,
    );
  }
  if (!isBoardId(board)) {
    throw boardError(
      'InvalidBoardId',
      `invalid board id ${JSON.stringify(board.slice(0, 80))}: 1 to 64 characters of A-Za-z0-9_`,
    );
  }
  if (claims && !claimsAllow(claims, board, verb)) {
    throw boardError('Forbidden', `token does not allow "${verb}" on board "${board}"`);
  }
  return { board, claims, expiresAt: claims ? claims.exp * 1000 : undefined, actor: claims?.sub };
}
