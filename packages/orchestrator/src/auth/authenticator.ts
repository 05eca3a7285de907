import { API_KEY_PREFIX, OrchError } from '@orch/protocol';
import { secretsEqual } from '../crypto/secrets.js';
import type { ApiKeysRepo } from '../store/api-keys-repo.js';
import type { BrowserSessions } from './browser-sessions.js';
import type { SessionClaims } from './session-cookie.js';

/**
 * Who is calling. `anonymous` exists only in pass-through mode (no master token and no key store),
 * where it is admitted everywhere, master-only routes included (orchestrator.md, rule 4). A
 * browser session is the master's, and says which session it is (`session`), so that a
 * connection it opened can be ended with it (`ConnectionGuard`).
 */
export type Principal =
  | { readonly kind: 'master'; readonly session?: SessionClaims }
  | { readonly kind: 'api_key'; readonly id: string }
  | { readonly kind: 'anonymous' };

/** What the bearer check looks at: the Authorization header and the session cookie. */
export interface Credentials {
  readonly authorization: string | undefined;
  readonly sessionCookie: string | undefined;
}

const CHALLENGE = 'Bearer realm="orchd"';

function unauthorized(message: string, invalidToken: boolean): OrchError {
  return new OrchError('unauthorized', message, undefined, 401, {
    'WWW-Authenticate': invalidToken ? `${CHALLENGE}, error="invalid_token"` : CHALLENGE,
  });
}

/**
 * The bearer check of orchestrator.md ("Authentication"): the Authorization header wins; without
 * one, the `orch_session` cookie (valid only if signed, unexpired and not logged out; the store is
 * read only for cookie requests). Master token compared in constant time; API keys only with a key
 * store; missing or invalid credentials are 401 `unauthorized` with `WWW-Authenticate: Bearer`.
 */
export class Authenticator {
  constructor(
    private readonly masterToken: string,
    private readonly apiKeys: ApiKeysRepo | undefined,
    private readonly sessions: BrowserSessions | undefined,
  ) {}

  /** No master token and no key store: every request passes, with no principal. */
  get passThrough(): boolean {
    return this.masterToken === '' && this.apiKeys === undefined;
  }

  /** Whether `token` is the master token (false when there is none). */
  isMaster(token: string): boolean {
    return this.masterToken !== '' && secretsEqual(token, this.masterToken);
  }

  async authenticate(creds: Credentials): Promise<Principal> {
    if (this.passThrough) return { kind: 'anonymous' };
    if (creds.authorization !== undefined) {
      const m = /^Bearer[ ]+(\S+)[ ]*$/i.exec(creds.authorization);
      if (!m) throw unauthorized('the Authorization header must be "Bearer <token>"', true);
      return this.fromToken(m[1]!);
    }
    if (creds.sessionCookie !== undefined) {
      // A logged-out (revoked) session gets exactly the answer of a forged or expired one.
      const session = await this.sessions?.live(creds.sessionCookie);
      if (session) return { kind: 'master', session };
      throw unauthorized('the browser session is invalid or has expired: log in again', true);
    }
    throw unauthorized('missing credentials: send "Authorization: Bearer <token>"', false);
  }

  private async fromToken(token: string): Promise<Principal> {
    if (this.isMaster(token)) return { kind: 'master' };
    if (this.apiKeys && token.startsWith(API_KEY_PREFIX)) {
      const key = await this.apiKeys.findActive(token);
      if (key) return { kind: 'api_key', id: key.id };
    }
    throw unauthorized('invalid token', true);
  }
}

/** Refuses API keys on master-only routes: 403 `unauthorized` (orchestrator.md, "API keys"). */
export function requireMaster(principal: Principal): void {
  if (principal.kind === 'api_key') {
    throw new OrchError(
      'unauthorized',
      'this operation needs the master token; API keys are not accepted here',
      undefined,
      403,
    );
  }
}
