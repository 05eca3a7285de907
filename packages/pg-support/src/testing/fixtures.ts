import { test } from 'vitest';
import { removeDataDir, tempDir } from './data-dir.js';
import type { StoreKind } from './stores.js';
import { TestPostgres } from './test-postgres.js';

/**
 * Cleanups registered while a test file runs, run in reverse order when it ends (what was started
 * last is stopped first: a server before its data dir, nodes before their database), whatever
 * happened in between. A failing cleanup does not stop the others; the first failure is rethrown.
 */
export class Cleanups {
  #steps: (() => unknown)[] = [];

  /** Registers `step`; returns `value`, so that `cleanups.add(x, () => x.stop())` reads as one line. */
  add<T>(value: T, step: () => unknown): T {
    this.#steps.push(step);
    return value;
  }

  /** Runs every registered step, last first. */
  async run(): Promise<void> {
    let failure: unknown;
    for (const step of this.#steps.splice(0).reverse()) {
      try {
        await step();
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== undefined) throw failure;
  }
}

/** A store opened for a suite: `databaseUrl` for the server store, nothing for the embedded one. */
export interface TestStore {
  kind: StoreKind;
  /** The `DATABASE_URL` of a fresh database on the suite's server, or undefined (embedded). */
  databaseUrl: string | undefined;
  /** The server behind `databaseUrl` (to halt and resume it), or undefined (embedded). */
  server: TestPostgres | undefined;
}

/** The fixtures of `pgTest`, all file-scoped (usable in `beforeAll`) and cleaned up when the file ends. */
export interface PgFixtures {
  /** Cleanups run when the file ends, last registered first. */
  cleanups: Cleanups;
  /** Makes a temp dir (0755) that is removed, after stopping an embedded PostgreSQL left in it. */
  tempDir: (prefix: string) => Promise<string>;
  /** The file's PostgreSQL server, started on first use. */
  testPostgres: TestPostgres;
  /** Opens a store of `kind`; the server store gets a database of its own on the file's server. */
  openStore: (kind: StoreKind) => Promise<TestStore>;
}

let databases = 0;

/**
 * vitest's `test`, extended with the PostgreSQL fixtures (`PgFixtures`). Each is set up on first
 * use and torn down when the test file ends, whether its tests passed, failed or its hooks threw.
 *
 * @example
 * ```ts
 * pgTest.beforeAll(async ({ openStore, tempDir }) => {
 *   const { databaseUrl } = await openStore('server');
 *   dir = await tempDir('orchd-');
 * });
 * ```
 */
export const pgTest = test
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern (none here)
  .extend('cleanups', { scope: 'file' }, async ({}, { onCleanup }) => {
    const cleanups = new Cleanups();
    onCleanup(() => cleanups.run());
    return cleanups;
  })
  .extend('tempDir', { scope: 'file' }, async ({ cleanups }) => async (prefix: string) => {
    const dir = await tempDir(prefix);
    return cleanups.add(dir, () => removeDataDir(dir));
  })
  .extend('testPostgres', { scope: 'file' }, async ({ cleanups }) => {
    const pg = await TestPostgres.start();
    return cleanups.add(pg, () => pg.destroy());
  })
  .extend(
    'openStore',
    { scope: 'file' },
    async ({ cleanups }) =>
      async (kind: StoreKind): Promise<TestStore> => {
        if (kind === 'embedded') return { kind, databaseUrl: undefined, server: undefined };
        // Not the testPostgres fixture: a file-scoped fixture cannot be set up lazily from here.
        const pg = await TestPostgres.start();
        cleanups.add(pg, () => pg.destroy());
        return { kind, databaseUrl: await pg.createDatabase(`store_${++databases}`), server: pg };
      },
  );
