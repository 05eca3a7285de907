import { randomBytes } from 'node:crypto';
import { API_KEY_PREFIX, type ApiKey, type CreatedApiKey } from '@orch/protocol';
import { type Kysely, type Selectable, sql } from 'kysely';
import { randomId, sha256Hex } from '../crypto/secrets.js';
import type { ApiKeysTable, Database } from './schema.js';

/** `last_used_at` is written at most this often per key, so that reads do not turn into writes. */
const TOUCH_EVERY_MS = 60_000;

/** API keys in the database: created, listed, revoked, and looked up by the SHA-256 of the secret. */
export class ApiKeysRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Mints a key: 32 random bytes after a recognisable prefix. The raw secret is returned only here. */
  async create(label: string): Promise<CreatedApiKey> {
    const secret = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
    const row = await this.db
      .insertInto('api_keys')
      .values({
        id: randomId('key_'),
        label,
        secret_sha256: sha256Hex(secret),
        hint: `${API_KEY_PREFIX}...${secret.slice(-4)}`,
        last_used_at: null,
        revoked_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ...toApiKey(row), secret };
  }

  async list(): Promise<ApiKey[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('revoked_at', 'is', null)
      .orderBy('created_at')
      .execute();
    return rows.map(toApiKey);
  }

  /** Revokes a key; false when there is no such (unrevoked) key. Effective on the next request everywhere. */
  async revoke(id: string): Promise<boolean> {
    const r = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Which of the keys `ids` are still live (exist and are not revoked): one query for all of them,
   * sent as one array parameter. Answers a subset of `ids`.
   */
  async liveAmong(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('api_keys')
      .select('id')
      .where('id', '=', sql<string>`any(${[...ids]}::text[])`)
      .where('revoked_at', 'is', null)
      .execute();
    return new Set(rows.map((r) => r.id));
  }

  /** The live key with this secret, read from the database on every call (no cache, so revocation is immediate). */
  async findActive(secret: string): Promise<{ id: string } | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'last_used_at'])
      .where('secret_sha256', '=', sha256Hex(secret))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return undefined;
    if (!row.last_used_at || Date.now() - row.last_used_at.getTime() > TOUCH_EVERY_MS) {
      await this.db
        .updateTable('api_keys')
        .set({ last_used_at: new Date() })
        .where('id', '=', row.id)
        .execute();
    }
    return { id: row.id };
  }
}

function toApiKey(row: Selectable<ApiKeysTable>): ApiKey {
  return {
    id: row.id,
    label: row.label,
    hint: row.hint,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at ? row.last_used_at.toISOString() : null,
  };
}
