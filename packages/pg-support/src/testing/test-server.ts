/**
 * The parts of `@support/pg/testing` that need no test runner (`@support/pg/test-server`), for
 * programs such as the benchmarks: a PostgreSQL server, `freePort`, temp data dirs.
 */
export { runAsInstalled } from './as-installed.js';
export { removeDataDir, tempDir } from './data-dir.js';
export { freePort } from './free-port.js';
export { TEMPLATE_DIR_ENV, TestPostgres } from './test-postgres.js';
