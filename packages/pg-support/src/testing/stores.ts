import { describe } from 'vitest';
import { TestPostgres } from './test-postgres.js';

/** True under CI, where a suite whose system dependency is missing fails instead of being skipped. */
export const IN_CI = process.env.CI === 'true';

/**
 * The two stores every store suite runs against (Kysely's DIALECTS loop): the program's embedded
 * PostgreSQL (no `DATABASE_URL`), and a PostgreSQL server reached through `DATABASE_URL`.
 */
export const STORES = ['embedded', 'server'] as const;
export type StoreKind = (typeof STORES)[number];

/** Whether a store can run here (the server store needs Debian's PostgreSQL binaries). */
export function storeAvailable(kind: StoreKind): boolean {
  return kind === 'embedded' || TestPostgres.available();
}

/**
 * Declares `suite` once per store, titled `title` with `%s` replaced by the store's name. Without
 * the server binaries the server run is skipped, except under CI, where it runs and fails.
 *
 * @example
 * ```ts
 * describeStores('orchd on the %s store', (store) => {
 *   pgTest.beforeAll(async ({ openStore }) => { url = (await openStore(store)).databaseUrl; });
 *   it('...', () => {});
 * });
 * ```
 */
export function describeStores(title: string, suite: (store: StoreKind) => void): void {
  for (const store of STORES) describeStore(store)(title.replace('%s', store), () => suite(store));
}

/** `describe` for a suite that needs the server store: skipped without it, except under CI. */
export const describeOnServerPostgres = describe.skipIf(!TestPostgres.available() && !IN_CI);

/**
 * `describe` for one store of the loop: skipped when the store cannot run here, except under CI.
 *
 * @example
 * ```ts
 * for (const store of STORES) {
 *   describeStore(store)(`board-node on the ${store} store`, () => { ... });
 * }
 * ```
 */
export function describeStore(kind: StoreKind): ReturnType<typeof describe.skipIf> {
  return describe.skipIf(!storeAvailable(kind) && !IN_CI);
}
