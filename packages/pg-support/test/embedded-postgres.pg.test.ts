/**
 * The embedded PostgreSQL both servers use: it starts on a private Unix socket, adopts an instance a
 * killed process left running (and stops it only when told to), comes back by itself when its
 * postmaster dies, runs as user `postgres` when root, and moves out of a data dir that user cannot
 * reach.
 */
import { readFileSync } from 'node:fs';
import { chmod, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  EmbeddedPostgres,
  type EmbeddedPostgresOptions,
  isStoreUnavailable,
  postmasterPid,
} from '@support/pg';
import { pgTest } from '@support/pg/testing';
import { describe, expect } from 'vitest';
import { query } from './query.js';

const silent = { info() {}, warn() {}, error() {} };
const isRoot = process.getuid?.() === 0;
const embedded = (dataDir: string, more: Partial<EmbeddedPostgresOptions> = {}) =>
  new EmbeddedPostgres({ dataDir, program: 'pg-test', logger: silent, ...more });

describe('EmbeddedPostgres', () => {
  pgTest('starts on a private Unix socket, no TCP, and stops', async ({ tempDir, cleanups }) => {
    const dir = await tempDir('pg-embedded-');
    const db = embedded(dir);
    cleanups.add(db, () => db.stop());
    expect(await db.start()).toEqual({ adopted: false });
    expect(db.layout).toEqual({ pgData: join(dir, 'pg', 'data'), socketDir: join(dir, 'pg', 'run') });
    expect(await query(db.connectionString, 'SHOW listen_addresses')).toEqual([{ listen_addresses: '' }]);
    expect(((await stat(db.layout.socketDir)).mode & 0o777).toString(8)).toBe('700');
    await db.stop();
    const err = await query(db.connectionString, 'SELECT 1').catch((e: unknown) => e);
    expect(isStoreUnavailable(err)).toBe(true);
  });

  pgTest('adopts an instance left running, and stops it only when it owns it', async ({ tempDir }) => {
    const dir = await tempDir('pg-adopt-');
    // A process that started PostgreSQL and was then killed: its instance keeps running.
    const killed = embedded(dir, { watchdogIntervalMs: 0 });
    await killed.start();
    const pid = await postmasterPid(killed.layout.pgData);

    const cli = embedded(dir);
    expect(await cli.start()).toEqual({ adopted: true });
    await cli.stop();
    expect(await query(cli.connectionString, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    expect(await postmasterPid(killed.layout.pgData)).toBe(pid);

    const server = embedded(dir, { stopAdopted: true });
    expect(await server.start()).toEqual({ adopted: true });
    await server.stop();
    expect(
      isStoreUnavailable(await query(server.connectionString, 'SELECT 1').catch((e: unknown) => e)),
    ).toBe(true);
  });

  pgTest('moves a cluster of the old orchd layout into place, keeping its data', async ({ tempDir }) => {
    const dir = await tempDir('pg-legacy-');
    const first = embedded(dir, { watchdogIntervalMs: 0 });
    await first.start();
    await query(
      first.connectionString,
      "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('acknowledged')",
    );
    await first.stop();
    // The layout orchd had before: the cluster right in <dir>/pg, scram auth, a password file.
    await rename(join(dir, 'pg', 'data'), join(dir, 'old-cluster'));
    await rm(join(dir, 'pg'), { recursive: true });
    await rename(join(dir, 'old-cluster'), join(dir, 'pg'));
    await writeFile(join(dir, 'pg', 'pg_hba.conf'), 'local all all scram-sha-256\n');
    await writeFile(join(dir, 'pg-password'), 'secret\n');

    const upgraded = embedded(dir, { watchdogIntervalMs: 0 });
    await upgraded.start();
    try {
      expect(await query(upgraded.connectionString, 'SELECT v FROM kept')).toEqual([{ v: 'acknowledged' }]);
      expect(await query(upgraded.connectionString, 'SHOW listen_addresses')).toEqual([
        { listen_addresses: '' },
      ]);
      expect(upgraded.layout.pgData).toBe(join(dir, 'pg', 'data'));
      await expect(stat(join(dir, 'pg-password'))).rejects.toThrow();
    } finally {
      await upgraded.stop();
    }
  });

  pgTest('starts its postmaster again when it dies', async ({ tempDir, cleanups }) => {
    const dir = await tempDir('pg-watchdog-');
    const db = embedded(dir, { watchdogIntervalMs: 100 });
    cleanups.add(db, () => db.stop());
    await db.start();
    await query(db.connectionString, "CREATE TABLE kept AS SELECT 'still here' AS v");
    const pid = (await postmasterPid(db.layout.pgData))!;
    process.kill(pid, 'SIGKILL');
    await expect
      .poll(() => query(db.connectionString, 'SELECT v FROM kept').catch(() => undefined), {
        timeout: 60_000,
        interval: 200,
      })
      .toEqual([{ v: 'still here' }]);
    expect(await postmasterPid(db.layout.pgData)).not.toBe(pid);
  });

  describe.runIf(isRoot)('as root', () => {
    pgTest('runs PostgreSQL as user postgres', async ({ tempDir, cleanups }) => {
      const dir = await tempDir('pg-root-');
      const db = embedded(dir);
      cleanups.add(db, () => db.stop());
      await db.start();
      const pid = (await postmasterPid(db.layout.pgData))!;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
      expect(uid).not.toBe(0);
      expect(await query(db.connectionString, 'SELECT current_user AS u')).toEqual([{ u: 'postgres' }]);
    });

    pgTest(
      'keeps the cluster under /var/lib/<program> when user postgres cannot reach the data dir',
      async ({ tempDir, cleanups }) => {
        const parent = await tempDir('pg-private-');
        await chmod(parent, 0o700);
        const dir = join(parent, 'data');
        await mkdir(dir);
        const program = `pg-support-test-${process.pid}`;
        cleanups.add(program, () => rm(`/var/lib/${program}`, { recursive: true, force: true }));
        const db = embedded(dir, { program });
        cleanups.add(db, () => db.stop());
        await db.start();
        expect(db.layout.pgData).toMatch(new RegExp(`^/var/lib/${program}/pg-[0-9a-f]{16}/data$`));
        expect(await query(db.connectionString, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
      },
    );
  });
});
