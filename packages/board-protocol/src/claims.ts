import { z } from 'zod';
import { BOARD_ID_PATTERN } from './board-id.js';
import { VERBS, type Verb } from './procedures.js';
import { textSchema } from './text.js';

/** The board key that grants verbs on every board. */
export const ANY_BOARD = '*';

/**
 * Claims of a capability token (a JWT, HS256).
 * - `boards`: board id (or `*` for every board) to the verbs allowed on it.
 * - `pin`: optional single board the token is pinned to; requests then need no `x-data-board`
 *   header, and a header naming another board is refused (403).
 * - `exp`: expiry, seconds since the epoch (required).
 * - `sub`: optional actor name, recorded as `actor` on change records.
 */
export const tokenClaimsSchema = z.object({
  boards: z.record(
    z.string().refine((b) => b === ANY_BOARD || BOARD_ID_PATTERN.test(b), 'board id or *'),
    z.array(z.enum(VERBS)),
  ),
  pin: z.string().regex(BOARD_ID_PATTERN).optional(),
  exp: z.number().int(),
  sub: textSchema('sub').max(200).optional(),
});

/** Claims of a capability token. */
export type TokenClaims = z.infer<typeof tokenClaimsSchema>;

/** True when the claims allow `verb` on `board` (a pinned token allows nothing on other boards). */
export function claimsAllow(claims: TokenClaims, board: string, verb: Verb): boolean {
  if (claims.pin !== undefined && claims.pin !== board) return false;
  // Own properties only: a board named like an Object.prototype member ("constructor") must not
  // pick up inherited values.
  const granted = (key: string) => (Object.hasOwn(claims.boards, key) ? (claims.boards[key] ?? []) : []);
  return [...granted(board), ...granted(ANY_BOARD)].includes(verb);
}
