/**
 * The README's first command: `npm start` (scripts/start.sh) runs a board-node on the embedded store
 * with a demo board, and the README's write, query and watch work against it; orchd runs beside it.
 */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { freePort, removeDataDir, tempDir } from '@support/pg/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { events, rpc, value, watch } from './fixtures.js';

const ROOT = resolve(import.meta.dirname, '../../..');

describe('npm start', () => {
  let dir: string;
  let url: string;
  let proc: ReturnType<typeof spawn>;
  let out = '';
  let orchdPort: number;

  beforeAll(async () => {
    const assets = process.env.ORCH_TEST_AGENT_ASSETS;
    if (!assets) throw new Error('ORCH_TEST_AGENT_ASSETS is not set (the vitest global setup sets it)');
    dir = await tempDir('board-start-');
    const port = await freePort();
    orchdPort = await freePort();
    url = `http://127.0.0.1:${port}`;
    proc = spawn('bash', [join(ROOT, 'scripts/start.sh')], {
      cwd: ROOT,
      detached: true, // its own process group, so that the whole pipeline can be stopped
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/root',
        BOARD_PORT: String(port),
        BOARD_DATA_DIR: join(dir, 'data'),
        ORCH_PORT: String(orchdPort),
        ORCH_DATA_DIR: join(dir, 'orchd'),
        AGENT_PORT: String(await freePort()),
        // The kernel and images the test command's `orch-agent setup` cached already (the
        // directory the vitest global setup names).
        AGENT_DATA_DIR: assets,
        XDG_CONFIG_HOME: join(dir, 'config'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout?.on('data', (d) => {
      out += String(d);
    });
    proc.stderr?.on('data', (d) => {
      out += String(d);
    });
    const t0 = Date.now();
    while (!out.includes('listening on') || !out.includes('Ctrl-C stops everything')) {
      if (proc.exitCode !== null) throw new Error(`start.sh exited early:\n${out}`);
      if (Date.now() - t0 > 120_000) throw new Error(`board-node did not start:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  afterAll(async () => {
    if (proc?.pid !== undefined && proc.exitCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      process.kill(-proc.pid, 'SIGTERM');
      await exited;
    }
    if (dir) await removeDataDir(join(dir, 'data'));
    if (dir) await removeDataDir(join(dir, 'orchd'));
    if (dir) await removeDataDir(dir);
  });

  it('shows orch compile, then serves the demo board: first write, query and watch', async () => {
    expect(out).toContain('orch compile');
    const w = value<{ watermark: number }>(
      await rpc(
        url,
        'mutate.insert',
        { rows: [{ id: 't1', title: 'hello', points: 3, state: 'open' }] },
        { board: 'demo' },
      ),
    );
    expect(w.watermark).toBe(1);
    const q = value<{ result: { columns: string[]; rows: unknown[][] } }>(
      await rpc(
        url,
        'query.execute',
        {
          sql: 'SELECT id, title, points FROM {{t}} WHERE points > $1',
          tables: [{ token: 't', entity: 'items' }],
          params: [1],
          minWatermark: 1,
        },
        { board: 'demo' },
      ),
    );
    expect(q.result).toEqual({ columns: ['id', 'title', 'points'], rows: [['t1', 'hello', 3]] });
    const stream = await watch(url, { board: 'demo', after: 0, until: (items) => events(items).length >= 1 });
    expect(events(stream.items)[0]).toMatchObject({ event: 'change', data: { seq: 1, kind: 'insert' } });
  });

  it('runs orchd beside it with the local orch-agent registered, and serves the dashboard', async () => {
    const hosts = await fetch(`http://127.0.0.1:${orchdPort}/v1/hosts`);
    expect(hosts.status).toBe(200);
    const body = (await hosts.json()) as {
      hosts: { id: string; kind: string; health: string; images: string[] }[];
    };
    expect(body.hosts).toEqual([
      expect.objectContaining({
        id: 'local',
        kind: 'microvm',
        health: 'healthy',
        images: expect.arrayContaining(['busybox']),
      }),
    ]);
    const page = await fetch(`http://127.0.0.1:${orchdPort}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('/assets/app.js');
  });

  it('keeps an idle watch stream alive with `: hb` comments at the default interval', async () => {
    const idle = await watch(url, { board: 'demo', timeoutMs: 40_000, until: (items) => items.length >= 1 });
    expect(idle.items).toEqual([{ comment: 'hb' }]);
  });
});
