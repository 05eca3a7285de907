import { execFile as execFileCb } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, readFile, rm, writeFile } from 'node:fs/promises';
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
    await writeFile(join(dir, 'pw'), `${PASSWORD}\n`);
    const owner = await postgresIds();
    if (owner) await chown(dir, owner.uid, owner.gid);
    const pwfile = `--pwfile=${join(dir, 'pw')}`;
    await pg.#exec('initdb', [
      '-D',
      pg.#data,
      '-U',
      'postgres',
      '--auth=scram-sha-256',
      pwfile,
      '-E',
      'UTF8',
    ]);
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
