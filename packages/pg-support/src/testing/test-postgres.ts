import { execFile as execFileCb } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from './data-dir.js';
import { freePort } from './free-port.js';

const execFile = promisify(execFileCb);
const BASE = '/usr/lib/postgresql';
const PASSWORD = 'test';
/** Fresh ports tried when the one picked was taken before the server bound it. */
const PORT_ATTEMPTS = 3;
/** How long `pg_ctl` waits for the server to accept connections (its default, 60 s, is short on a loaded machine). */
const START_TIMEOUT_S = 180;
/**
 * A directory (made by the test runner's global setup, removed when the run ends) where the first
 * server of a run keeps its freshly initialised cluster; later servers copy it (a tenth of a second)
 * instead of running initdb again (a second or two of CPU each, forty-odd times a run).
 */
export const TEMPLATE_DIR_ENV = 'TEST_PG_TEMPLATE_DIR';

/**
 * A PostgreSQL server for tests (the "server" store, reached through `DATABASE_URL`): Debian's
 * `postgresql-15` binaries, a throw-away cluster on a free loopback port with password
 * authentication, run as user `postgres` when the tests run as root. `halt()`/`resume()` make an
 * outage; `destroy()` stops it and removes its directory.
 *
 * @example
 * ```ts
 * const pg = await TestPostgres.start();
 * const url = await pg.createDatabase('suite'); // postgres://postgres:test@127.0.0.1:<port>/suite
 * await pg.destroy();
 * ```
 */
export class TestPostgres {
  #running = true;

  #port: number;

  private constructor(
    /** The directory holding the cluster (`data/`), its log and its socket. */
    readonly dir: string,
    port: number,
    private readonly bin: string,
    private readonly settings: Record<string, string>,
  ) {
    this.#port = port;
  }

  /** The loopback port the server listens on (kept across `halt()`/`resume()`). */
  get port(): number {
    return this.#port;
  }

  /** Whether the server binaries are installed (Debian package `postgresql-15`). */
  static available(): boolean {
    return findBin() !== undefined;
  }

  /**
   * Initialises a cluster in a temp directory and starts it. `settings` are server parameters over
   * the defaults (`max_connections=300`, `fsync=off`: test data need not survive a power cut).
   */
  static async start(settings: Record<string, string> = {}): Promise<TestPostgres> {
    const bin = findBin();
    if (!bin)
      throw new Error(`PostgreSQL server binaries not found under ${BASE} (Debian package postgresql-15)`);
    const dir = await tempDir('test-pg-');
    const pg = new TestPostgres(dir, await freePort(), bin, {
      max_connections: '300',
      fsync: 'off',
      ...settings,
    });
    const owner = await postgresIds();
    if (owner) await chown(dir, owner.uid, owner.gid);
    const template = await clusterTemplate(bin);
    if (template) await execFile('cp', ['-a', template, pg.#data]);
    else await initdb(bin, pg.#data, dir);
    // The port was free when picked, but any socket (an outgoing connection's local port too) can
    // take it before the server binds it: then the server starts again on another one.
    for (let attempt = 1; ; attempt++) {
      try {
        await pg.resume();
        return pg;
      } catch (err) {
        if (attempt >= PORT_ATTEMPTS || !(await pg.#lostPort())) throw err;
        pg.#port = await freePort();
      }
    }
  }

  /** Whether the last start failed because the port was in use. */
  async #lostPort(): Promise<boolean> {
    return /could not bind|Address already in use/i.test(await this.#log());
  }

  /** The end of the server's log (what `pg_ctl` means by "Examine the log output"). */
  async #log(): Promise<string> {
    const text = await readFile(join(this.dir, 'log'), 'utf8').catch(() => '');
    return text.split('\n').slice(-20).join('\n');
  }

  get #data(): string {
    return join(this.dir, 'data');
  }

  /** The URL of `database` (default `postgres`), with the password. */
  url(database = 'postgres'): string {
    return `postgres://postgres:${PASSWORD}@127.0.0.1:${this.port}/${database}`;
  }

  /** Creates an empty database (so that each group of servers in a suite gets its own); its URL. */
  async createDatabase(name: string): Promise<string> {
    const args = [
      '-h',
      '127.0.0.1',
      '-p',
      String(this.port),
      '-U',
      'postgres',
      '-c',
      `CREATE DATABASE "${name}"`,
    ];
    await this.#exec('psql', args, { PGPASSWORD: PASSWORD });
    return this.url(name);
  }

  /**
   * Stops the server, keeping its data (an outage). `fast` ends sessions cleanly; `immediate` is a
   * crash (no shutdown checkpoint).
   */
  async halt(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.#exec('pg_ctl', ['stop', '-D', this.#data, '-m', mode, '-w']);
    this.#running = false;
  }

  /** Starts a halted server again, on the same port. */
  async resume(): Promise<void> {
    const options = [`-p ${this.port}`, '-c listen_addresses=127.0.0.1', `-k ${this.dir}`];
    for (const [name, value] of Object.entries(this.settings)) options.push(`-c ${name}=${value}`);
    const log = join(this.dir, 'log');
    const args = ['start', '-D', this.#data, '-w', '-t', String(START_TIMEOUT_S), '-l', log];
    try {
      await this.#exec('pg_ctl', [...args, '-o', options.join(' ')]);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nserver log (end):\n${await this.#log()}`);
    }
    this.#running = true;
  }

  /** Stops the server (immediate) and removes its directory. */
  async destroy(): Promise<void> {
    if (this.#running) await this.halt('immediate').catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }

  async #exec(tool: string, args: string[], env: Record<string, string> = {}): Promise<void> {
    const cmd = join(this.bin, tool);
    const owner = await postgresIds();
    try {
      await execFile(cmd, args, { ...(owner ?? {}), cwd: '/', env: { ...process.env, ...env } });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')}: ${e.stderr || e.message}`);
    }
  }
}

function findBin(): string | undefined {
  if (!existsSync(BASE)) return undefined;
  const versions = readdirSync(BASE).sort((a, b) => Number(b) - Number(a));
  return versions.map((v) => join(BASE, v, 'bin')).find((b) => existsSync(join(b, 'pg_ctl')));
}

/** As root, the server runs as user `postgres` (it refuses root). */
async function postgresIds(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number((await execFile('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await execFile('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

/**
 * `initdb` of a test cluster into `data`: user `postgres` with the test password (its file written
 * to `scratch`), no fsync at the end (test data need not survive a power cut).
 */
async function initdb(bin: string, data: string, scratch: string): Promise<void> {
  const pwfile = join(scratch, 'pw');
  await writeFile(pwfile, `${PASSWORD}\n`);
  const args = ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwfile}`, '-E', 'UTF8'];
  const owner = await postgresIds();
  try {
    await execFile(join(bin, 'initdb'), [...args, '--no-sync'], { ...(owner ?? {}), cwd: '/' });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`initdb ${args.join(' ')}: ${e.stderr || e.message}`);
  } finally {
    await rm(pwfile, { force: true });
  }
}

/**
 * The run's initialised cluster for these binaries (made now if it is not there yet), or undefined
 * outside a test run that provides {@link TEMPLATE_DIR_ENV}. It appears by a rename once initdb has
 * finished, so it is never seen half-written; two servers that make it at once both succeed (the
 * second rename fails, and that one uses the first).
 */
async function clusterTemplate(bin: string): Promise<string | undefined> {
  const root = process.env[TEMPLATE_DIR_ENV];
  if (!root) return undefined;
  const final = join(root, createHash('sha256').update(bin).digest('hex').slice(0, 16));
  if (existsSync(join(final, 'PG_VERSION'))) return final;
  const scratch = join(root, `.tmp-${randomBytes(6).toString('hex')}`);
  await mkdir(scratch, { mode: 0o755 });
  try {
    const owner = await postgresIds();
    if (owner) await chown(scratch, owner.uid, owner.gid);
    await initdb(bin, join(scratch, 'data'), scratch);
    await rename(join(scratch, 'data'), final).catch((err: NodeJS.ErrnoException) => {
      if (!existsSync(join(final, 'PG_VERSION'))) throw err;
    });
    return final;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
