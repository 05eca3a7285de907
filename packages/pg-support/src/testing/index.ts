/**
 * Test support for the servers' PostgreSQL stores (`@support/pg/testing`): a server PostgreSQL,
 * `freePort`, the store loop, and vitest fixtures that always clean up.
 */
export { Cleanups, type PgFixtures, pgTest, type TestStore } from './fixtures.js';
export { dropListenSession } from './listen-drops.js';
export {
  describeOnServerPostgres,
  describeStore,
  describeStores,
  IN_CI,
  STORES,
  type StoreKind,
  storeAvailable,
} from './stores.js';
export * from './test-server.js';
