import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real PostgreSQL server for tests (the "server" store, reached through DATABASE_URL): Debian's
 * postgresql package, a throw-away cluster on a free loopback port, run as `postgres` when the tests
 * run as root. `stop()`/`start()` simulate an outage. Under CI its absence fails the suite.
 */
export class PgServer {
  private proc: ChildProcess | undefined;
  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
  ) {}

  static available(): boolean {
    return findBin() !== undefined;
  }

  static async create(): Promise<PgServer> {
    const bin = findBin();
    if (!bin) throw new Error('PostgreSQL server binaries not found (install Debian package postgresql)');
    const dir = mkdtempSync(join(tmpdir(), 'orch-pg-'));
    const server = new PgServer(dir, await freePort(), bin);
    writeFileSync(join(dir, 'pw'), 'test\n');
    if (isRoot()) chownSync(dir, uid('postgres'), uid('postgres', '-g'));
    server.exec('initdb', [
      '-D',
      join(dir, 'data'),
      '-U',
      'postgres',
      '--auth=scram-sha-256',
      `--pwfile=${join(dir, 'pw')}`,
    ]);
    await server.start();
    return server;
  }

  url(database = 'postgres'): string {
    return `postgres://postgres:test@127.0.0.1:${this.port}/${database}`;
  }

  /** Creates an empty database, so that each group of orchd processes gets its own. */
  createDatabase(name: string): string {
    this.exec(
      'psql',
      ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', '-c', `CREATE DATABASE "${name}"`],
      {
        PGPASSWORD: 'test',
      },
    );
    return this.url(name);
  }

  async start(): Promise<void> {
    const args = [
      '-D',
      join(this.dir, 'data'),
      '-p',
      String(this.port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${this.dir}`,
    ];
    const [cmd, argv] = asPostgres(join(this.bin, 'postgres'), args);
    const proc = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    await new Promise<void>((resolve, reject) => {
      let log = '';
      proc.stderr!.on('data', (chunk: Buffer) => {
        log += chunk.toString();
        if (log.includes('ready to accept connections')) resolve();
      });
      proc.once('exit', (code) => reject(new Error(`postgres exited (${code}): ${log}`)));
    });
  }

  /** Fast shutdown (pg_ctl, which signals the postmaster itself): clients are cut off, committed data is kept. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    this.exec('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'fast', '-w', 'stop']);
    await exited;
    this.proc = undefined;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private exec(tool: string, args: string[], env: Record<string, string> = {}): void {
    const [cmd, argv] = asPostgres(join(this.bin, tool), args);
    execFileSync(cmd, argv, { stdio: 'pipe', env: { ...process.env, ...env } });
  }
}

function findBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
  return versions.map((v) => join(base, v, 'bin')).find((b) => existsSync(join(b, 'initdb')));
}

const isRoot = () => process.getuid?.() === 0;
const uid = (user: string, flag = '-u') =>
  Number(execFileSync('id', [flag, user], { encoding: 'utf8' }).trim());

function asPostgres(cmd: string, args: string[]): [string, string[]] {
  return isRoot() ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

/** A TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
