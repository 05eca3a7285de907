/**
 * Test support for the servers' PostgreSQL stores (`@support/pg/testing`): a server PostgreSQL,
 * `freePort`, the store loop, and vitest fixtures that always clean up.
 */
export { runAsInstalled } from './as-installed.js';
export { removeDataDir, tempDir } from './data-dir.js';
export { Cleanups, type PgFixtures, pgTest, type TestStore } from './fixtures.js';
export { freePort } from './free-port.js';
export {
  describeOnServerPostgres,
  describeStore,
  describeStores,
  IN_CI,
  STORES,
  type StoreKind,
  storeAvailable,
} from './stores.js';
export { TestPostgres } from './test-postgres.js';
