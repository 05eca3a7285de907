export {
  EmbeddedPostgres,
  type EmbeddedPostgresLayout,
  type EmbeddedPostgresOptions,
  type PgLogger,
  postmasterPid,
} from './embedded-postgres.js';
export { isStoreUnavailable } from './store-unavailable.js';
