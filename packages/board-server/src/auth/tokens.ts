import { ANY_BOARD, isBoardId, type TokenClaims, tokenClaimsSchema, type Verb } from '@board/protocol';
import { jwtVerify, SignJWT } from 'jose';
import { boardError } from '../errors.js';

/** Parses a duration like `90s`, `15m`, `1h`, `7d` into seconds. */
export function parseTtl(ttl: string): number {
  const m = /^(\d+)\s*([smhd])$/.exec(ttl.trim());
  if (!m) throw boardError('InvalidInput', `invalid ttl "${ttl}" (use e.g. 90s, 15m, 1h, 7d)`);
  const n = Number(m[1]);
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
  return n * unit;
}

/**
 * Mints a capability token (HS256 JWT).
 * @example
 * await mintToken(secret, { boards: ['tasks'], verbs: ['read', 'write'], ttlSec: 3600, pin: true });
 */
export async function mintToken(
  secret: string,
  options: { boards: string[]; verbs: Verb[]; ttlSec: number; pin?: boolean; subject?: string; now?: number },
): Promise<string> {
  if (options.boards.length === 0) throw boardError('InvalidInput', 'at least one --board is required');
  for (const b of options.boards) {
    if (b !== ANY_BOARD && !isBoardId(b)) throw boardError('InvalidBoardId', `invalid board id "${b}"`);
  }
  if (options.pin && (options.boards.length !== 1 || options.boards[0] === ANY_BOARD)) {
    throw boardError('InvalidInput', '--pin needs exactly one concrete --board');
  }
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  const claims: Record<string, unknown> & Omit<TokenClaims, 'exp' | 'sub'> = {
    boards: Object.fromEntries(options.boards.map((b) => [b, options.verbs])),
    ...(options.pin ? { pin: options.boards[0] as string } : {}),
    ...(options.subject !== undefined ? { sub: options.subject } : {}),
  };
  return await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(now)
    .setExpirationTime(now + options.ttlSec)
    .sign(new TextEncoder().encode(secret));
}

/** Verifies a bearer token; any failure (signature, expiry, claim shape) is `Unauthenticated`. */
export async function verifyToken(secret: string, token: string): Promise<TokenClaims> {
  try {
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { algorithms: ['HS256'] });
    return tokenClaimsSchema.parse(payload);
  } catch (err) {
    const why = (err as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'token expired' : 'invalid token';
    throw boardError('Unauthenticated', why);
  }
}
