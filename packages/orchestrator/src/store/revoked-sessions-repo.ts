import { type Kysely, sql } from 'kysely';
import { sha256Hex } from '../crypto/secrets.js';
import type { Database } from './schema.js';

/**
 * Browser sessions ended by `POST /logout`, shared by every `orchd` on the store and kept across
 * restarts. A row holds the SHA-256 of the session id (the id alone authenticates nothing, since
 * the cookie's MAC is needed too; hashing keeps even that out of the database) and the session's
 * own expiry. A row is kept a day past that expiry, so an `orchd` whose clock lags the database's
 * still refuses the session until its own clock says it expired; rows older than that are deleted
 * at each revocation, so the table holds at most about eight days of logouts.
 */
export class RevokedSessionsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Records that session `sid` (expiring at `expiresAt`) has ended, and prunes long-expired rows, in one statement. */
  async revoke(sid: string, expiresAt: Date): Promise<void> {
    await this.db
      .with('pruned', (db) =>
        db.deleteFrom('revoked_sessions').where('expires_at', '<', sql<Date>`now() - interval '1 day'`),
      )
      .insertInto('revoked_sessions')
      .values({ sid_sha256: sha256Hex(sid), expires_at: expiresAt })
      .onConflict((oc) => oc.column('sid_sha256').doNothing())
      .execute();
  }

  /** Whether session `sid` has been revoked: one primary-key read. */
  async isRevoked(sid: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('revoked_sessions')
      .select('sid_sha256')
      .where('sid_sha256', '=', sha256Hex(sid))
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Which of the sessions `sids` have been revoked: one query for all of them (an index lookup per
   * id, sent as one array parameter however many there are). Answers a subset of `sids`.
   */
  async revokedAmong(sids: readonly string[]): Promise<Set<string>> {
    if (sids.length === 0) return new Set();
    const byHash = new Map(sids.map((sid) => [sha256Hex(sid), sid]));
    const rows = await this.db
      .selectFrom('revoked_sessions')
      .select('sid_sha256')
      .where('sid_sha256', '=', sql<string>`any(${[...byHash.keys()]}::text[])`)
      .execute();
    return new Set(rows.flatMap((r) => byHash.get(r.sid_sha256) ?? []));
  }
}
