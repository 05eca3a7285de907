import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { Environment, Host } from '@orch/protocol';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { gpuDevice, gpuStatus, migH100 } from './gpu-hosts.js';
import { OrchdProcess, tempDataDir } from './orchd-process.js';
import { REPO_ROOT } from './run-cli.js';

/**
 * The dashboard in real Chromium (Debian's, driven by playwright-core): the operator's path from
 * login to logout, against a real orchd and a test agent. Screenshots of each page are written to
 * test-artifacts/dashboard/.
 */
const CHROMIUM = '/usr/bin/chromium';
if (!existsSync(CHROMIUM) && process.env.CI === 'true')
  throw new Error('Chromium is required for the browser tests under CI');
const ARTIFACTS = join(REPO_ROOT, 'test-artifacts', 'dashboard');
const MASTER = 'dashboard-master-token';
const AGENT_TOKEN = 'dashboard-agent-token';

describe.skipIf(!existsSync(CHROMIUM))('the dashboard in Chromium', () => {
  const data = tempDataDir();
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  let browser: Browser;
  let page: Page;
  let evil: Server;

  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    orchd = await OrchdProcess.start({
      ORCH_DATA_DIR: data.dir,
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '1',
      ORCH_HOST_HEALTH_INTERVAL_SEC: '1',
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });

  afterAll(async () => {
    await browser?.close();
    await orchd?.stop();
    await agent?.close();
    evil?.close();
    data.cleanup();
  });

  test('an unauthenticated visit lands on the login page; a wrong token shows the error', async () => {
    await page.goto(orchd.url);
    await page.waitForURL(`${orchd.url}/login`);
    await page.fill('input[name=token]', 'wrong');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('[role=alert]')).toBe('wrong token');
    await shot('01-login-error');
  });

  test('logging in shows the registered host; cordon and uncordon it', async () => {
    await page.fill('input[name=token]', MASTER);
    await page.click('button[type=submit]');
    await page.waitForURL(`${orchd.url}/`);
    await page.goto(`${orchd.url}/#/hosts`);
    const row = page.locator('tr[data-host=h1]');
    await expect.poll(() => row.textContent()).toContain('healthy');
    await shot('02-hosts');
    await row.getByRole('button', { name: 'Cordon' }).click();
    await expect.poll(() => row.textContent()).toContain('cordoned');
    expect(((await orchd.request('GET', '/v1/hosts/h1', { token: MASTER })).body as Host).state).toBe(
      'cordoned',
    );
    await row.getByRole('button', { name: 'Uncordon' }).click();
    await expect.poll(() => row.textContent()).toContain('active');
    expect(((await orchd.request('GET', '/v1/hosts/h1', { token: MASTER })).body as Host).state).toBe(
      'active',
    );
    // A change made elsewhere (the API, another orchd) reaches the open page through the event
    // stream, well within expect.poll's 1 s (the page no longer polls).
    const viaApi = (action: string) =>
      orchd.request('POST', `/v1/hosts/h1?action=${action}`, { token: MASTER });
    expect((await viaApi('cordon')).status).toBe(200);
    await expect.poll(() => row.textContent()).toContain('cordoned');
    expect((await viaApi('uncordon')).status).toBe(200);
    await expect.poll(() => row.textContent()).toContain('active');

    // The host's page: its capacity over the last hour, from the agent's health-check answers.
    agent.info = { ...agent.info, free: { cpus: 6, ram_mb: 12288, disk_gb: 180 } };
    await row.getByRole('link', { name: 'h1' }).click();
    await page.waitForURL(/#\/hosts\/h1$/);
    await expect.poll(() => page.textContent('[data-host-page]')).toContain('h1');
    await expect
      .poll(async () => Number(await page.getAttribute('[data-chart]', 'data-chart')), { timeout: 20_000 })
      .toBeGreaterThan(0);
    expect(await page.locator('[data-chart] polyline').count()).toBe(3);
    // The page reads the history again by itself: the busier moment shows up.
    await expect
      .poll(() => page.textContent('[data-chart] .legend'), { timeout: 40_000 })
      .toContain('CPUs 25%');
    await shot('02b-host');
    // A host whose agent reports GPUs gets a GPU section: detection, passthrough, one row per GPU.
    expect(await page.locator('[data-gpu-state]').count()).toBe(0);
    agent.info = {
      ...agent.info,
      gpu_devices: [gpuDevice('0000:18:00.0'), migH100('0000:3b:00.0')],
      gpu_status: gpuStatus({ passthrough: { available: false, missing: ['KVM (tcg)'] } }),
    };
    await expect
      .poll(() => page.textContent('[data-gpu-state]'), { timeout: 40_000 })
      .toBe('Detection: ok (driver 550.54.15)');
    expect(await page.textContent('[data-gpu-passthrough]')).toBe(
      'detects GPUs but cannot pass them to VMs: missing KVM (tcg)',
    );
    expect(await page.locator('[data-gpu]').count()).toBe(2);
    expect(await page.textContent('[data-gpu]:nth-child(2)')).toContain('on: 7 instance(s) 1g.10gb');
    agent.info = { ...agent.info, free: { ...agent.info.capacity }, gpu_devices: [], gpu_status: null };
  });

  test('a new environment from a definition, with the compile preview; exec echo hi; take a snapshot', async () => {
    await page.goto(`${orchd.url}/#/new`);
    await page.fill(
      'textarea[name=definition]',
      'version: 1\nimage: debian-12\nresources:\n  cpus: 1\n  memory: 512MiB\nrun:\n  - echo ready\n',
    );
    await expect.poll(() => page.textContent('[data-preview]')).toContain('startup script');
    await page.fill('textarea[name=definition]', 'version: 2\n');
    await expect
      .poll(() => page.textContent('[data-preview]'))
      .toBe('orch.yaml:1:10: version 2 is not supported: the only version is 1');
    await page.fill(
      'textarea[name=definition]',
      'version: 1\nimage: debian-12\nresources:\n  cpus: 1\n  memory: 512MiB\nrun:\n  - echo ready\n',
    );
    await shot('03-new-environment');
    // The environment's page shows the create's progress until it runs, and its startup log live.
    agent.bootMs = 4000;
    await page.getByRole('button', { name: 'Create environment' }).click();
    await page.waitForURL(/#\/environments\/env_[\w-]+$/);
    const envId = decodeURIComponent(page.url().split('/').pop()!);
    await expect.poll(() => page.textContent('[data-progress]')).toContain('Creating on h1');
    await shot('03b-creating');
    agent.appendLog(envId, 'ready\n');
    await expect.poll(() => page.textContent('[data-state]'), { timeout: 15_000 }).toBe('running');
    expect(await page.locator('[data-progress]').count()).toBe(0);
    await expect.poll(() => page.textContent('[data-log]')).toBe('ready\n');
    agent.appendLog(envId, 'serving on :8080\n');
    await expect.poll(() => page.textContent('[data-log]')).toBe('ready\nserving on :8080\n');
    // A snapshot taken on the page shows its progress, then joins the page's snapshot list.
    agent.snapshotMs = 2500;
    await page.getByRole('button', { name: 'Live snapshot' }).click();
    await expect.poll(() => page.textContent('[data-progress]')).toContain('Taking a live snapshot');
    await shot('03c-snapshotting');
    await expect.poll(() => page.locator('[data-section=snapshots] tr[data-snapshot]').count()).toBe(1);
    await expect.poll(() => page.locator('[data-progress]').count(), { timeout: 10_000 }).toBe(0);
    await shot('03d-environment');
    agent.snapshotMs = 0;

    await page.goto(`${orchd.url}/#/environments`);
    const row = page.locator('tr[data-env]').first();
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toContain('running');
    await shot('04-environments');

    await row.getByRole('button', { name: 'Exec' }).click();
    await page.fill('input[name=command]', 'echo hi');
    await page.getByRole('button', { name: 'Run' }).click();
    // The test agent answers an exec with its argv: ["sh", "-c", "echo hi"].
    await expect.poll(() => page.textContent('[data-output]')).toContain('echo hi');
    await expect.poll(() => page.textContent('[data-output]')).toContain('[exit 0]');
    await shot('05-exec');

    // The console: a terminal widget over the attach WebSocket (the test agent echoes in upper case).
    await row.getByRole('button', { name: 'Console' }).click();
    await page.locator('.xterm').click();
    await page.keyboard.type('hello console');
    await expect.poll(() => page.textContent('.xterm-rows')).toContain('HELLO CONSOLE');
    await shot('05b-console');
    await page.getByRole('button', { name: 'Close' }).click();

    await row.getByRole('button', { name: 'Snapshot', exact: true }).click();
    await expect.poll(() => page.textContent('.toast')).toMatch(/^Snapshot snap_\S+ \(disk\) is ready$/);
    await page.goto(`${orchd.url}/#/snapshots`);
    await expect.poll(() => page.locator('tr[data-snapshot]').count()).toBe(2);
    await shot('06-snapshots');
    const envs = (await orchd.request('GET', '/v1/environments', { token: MASTER })).body as {
      environments: Environment[];
    };
    expect(envs.environments[0]).toMatchObject({ state: 'running', task_id: 'dashboard' });
  });

  test('a restore shows its progress on the new environment page until it runs', async () => {
    await page.goto(`${orchd.url}/#/snapshots`);
    const [original] = (
      (await orchd.request('GET', '/v1/environments', { token: MASTER })).body as {
        environments: Environment[];
      }
    ).environments;
    agent.bootMs = 4000;
    await page.locator('tr[data-snapshot]').last().getByRole('button', { name: 'Restore' }).click();
    await page.waitForURL(/#\/environments\/env_[\w-]+$/);
    await expect.poll(() => page.textContent('[data-progress]')).toMatch(/^Creating from snap_\S+ on h1…/);
    await expect.poll(() => page.textContent('[data-state]'), { timeout: 15_000 }).toBe('running');
    agent.bootMs = 50;
    // The original stops; the restored one is the environment the next tests work with.
    expect(
      (await orchd.request('DELETE', `/v1/environments/${original!.id}`, { token: MASTER })).status,
    ).toBe(200);
  });

  test("an environment's page lists its services and follows a service's log", async () => {
    const manifest = {
      version: '1',
      machine: { workspace: '/workspace' },
      services: { db: { image: 'postgres:16', ports: [5432] } },
    };
    const created = await orchd.request('POST', '/v1/environments', {
      token: MASTER,
      body: {
        task_id: 'with-db',
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
        manifest_inline: Buffer.from(JSON.stringify(manifest)).toString('base64'),
        startup_script: 'true\n',
      },
    });
    expect(created.status).toBe(201);
    const env = created.body as Environment;
    agent.appendLog(env.id, 'startup done\n');
    agent.appendLog(env.id, 'database system is ready to accept connections\n', 'db');
    await page.goto(`${orchd.url}/#/environments/${env.id}`);
    const db = page.locator('tr[data-service=db]');
    await expect.poll(() => db.textContent(), { timeout: 15_000 }).toContain('running');
    expect(await db.textContent()).toContain('postgres:16');
    await expect.poll(() => page.textContent('[data-log]')).toBe('startup done\n');
    await page.selectOption('select[name=log]', 'db');
    await expect
      .poll(() => page.textContent('[data-log]'))
      .toBe('database system is ready to accept connections\n');
    agent.appendLog(env.id, 'checkpoint complete\n', 'db');
    await expect
      .poll(() => page.textContent('[data-log]'))
      .toBe('database system is ready to accept connections\ncheckpoint complete\n');
    await shot('03e-services');
    // Stopped again, so the next tests work with the restored environment.
    expect((await orchd.request('DELETE', `/v1/environments/${env.id}`, { token: MASTER })).status).toBe(200);
  });

  test('a cross-site form post to a state-changing route is refused', async () => {
    // A page on another origin (same site: another port on 127.0.0.1, so SameSite=Lax still sends the cookie).
    evil = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          `<form id="f" method="POST" action="${orchd.url}/v1/hosts/h1?action=cordon"><input name="x" value="1"></form><script>document.getElementById('f').submit()</script>`,
        );
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    const evilUrl = `http://127.0.0.1:${(evil.address() as { port: number }).port}/`;
    const answer = page.waitForResponse((r) => r.url().includes('/v1/hosts/h1'));
    await page.goto(evilUrl);
    const res = await answer;
    expect(res.status()).toBe(403);
    expect(await res.json()).toMatchObject({
      error: { code: 'unauthorized', message: expect.stringContaining('same-origin JSON') },
    });
    expect(((await orchd.request('GET', '/v1/hosts/h1', { token: MASTER })).body as Host).state).toBe(
      'active',
    );
  });

  test('pause and resume the environment with its buttons', async () => {
    await page.goto(`${orchd.url}/#/environments`);
    const id = await page.locator('tr[data-env]', { hasText: 'running' }).first().getAttribute('data-env');
    const row = page.locator(`tr[data-env="${id}"]`);
    await row.getByRole('button', { name: 'Pause' }).click();
    await expect.poll(() => row.locator('td').nth(1).textContent()).toBe('paused');
    expect(await row.getByRole('button', { name: 'Exec' }).count()).toBe(0);
    await shot('06b-paused');
    await row.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => row.locator('td').nth(1).textContent()).toBe('running');
    expect(await row.getByRole('button', { name: 'Resume' }).count()).toBe(0);
    expect(
      ((await orchd.request('GET', `/v1/environments/${id}`, { token: MASTER })).body as Environment).state,
    ).toBe('running');
  });

  test('delete the snapshots, stop the environment, remove the host only once confirmed', async () => {
    await page.goto(`${orchd.url}/#/snapshots`);
    await page.locator('tr[data-snapshot]').first().getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => page.locator('tr[data-snapshot]').count()).toBe(1);
    await page.locator('tr[data-snapshot]').getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => page.textContent('main')).toContain('No snapshots yet');
    const snaps = (await orchd.request('GET', '/v1/snapshots', { token: MASTER })).body as {
      snapshots: unknown[];
    };
    expect(snaps.snapshots).toEqual([]);

    await page.goto(`${orchd.url}/#/environments`);
    const id = await page.locator('tr[data-env]', { hasText: 'running' }).first().getAttribute('data-env');
    const row = page.locator(`tr[data-env="${id}"]`);
    await row.getByRole('button', { name: 'Stop' }).click();
    // The page polls: the row shows the state the reconciler reaches, and loses its Stop button.
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toContain('stopped');
    expect(await row.getByRole('button', { name: 'Stop' }).count()).toBe(0);

    await page.goto(`${orchd.url}/#/hosts`);
    const host = page.locator('tr[data-host=h1]');
    const deletes: string[] = [];
    page.on('request', (r) => r.method() === 'DELETE' && deletes.push(r.url()));
    page.once('dialog', (d) => void d.dismiss());
    const refreshed = page.waitForResponse((r) => r.url().endsWith('/v1/hosts'));
    await host.getByRole('button', { name: 'Remove' }).click();
    await refreshed;
    expect(deletes).toEqual([]);
    expect((await orchd.request('GET', '/v1/hosts/h1', { token: MASTER })).status).toBe(200);
    page.once('dialog', (d) => {
      expect(d.message()).toBe('Remove host h1?');
      void d.accept();
    });
    await host.getByRole('button', { name: 'Remove' }).click();
    await expect.poll(() => page.textContent('main')).toContain('No hosts yet');
    expect((await orchd.request('GET', '/v1/hosts/h1', { token: MASTER })).status).toBe(404);
  });

  test('logging out sends the browser back to the login page, and a copy of its cookie is refused', async () => {
    await page.goto(`${orchd.url}/#/environments`);
    const copied = (await page.context().cookies()).find((c) => c.name === 'orch_session')!;
    const cookie = `orch_session=${copied.value}`;
    expect((await orchd.request('GET', '/v1/hosts', { cookie })).status).toBe(200);
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${orchd.url}/login`);
    await page.goto(orchd.url);
    await page.waitForURL(`${orchd.url}/login`);
    await shot('07-logged-out');
    expect((await orchd.request('GET', '/v1/hosts', { cookie })).status).toBe(401);
  });
});

describe.skipIf(!existsSync(CHROMIUM))(
  'the dashboard without authentication, behind a CIDR allowlist',
  () => {
    test('opens directly and says that authentication is disabled', async () => {
      const data = tempDataDir();
      const orchd = await OrchdProcess.start({ ORCH_DATA_DIR: data.dir, ORCH_ALLOWED_CIDRS: '127.0.0.0/8' });
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });
      try {
        const page = await browser.newPage();
        await page.goto(`${orchd.url}/#/hosts`);
        await expect.poll(() => page.textContent('.banner')).toContain('Authentication is disabled');
        await expect.poll(() => page.textContent('main')).toContain('No hosts yet');
        expect(await page.locator('button', { hasText: 'Log out' }).count()).toBe(0);
        await page.screenshot({ path: join(ARTIFACTS, '08-open-mode.png') });
      } finally {
        await browser.close();
        await orchd.stop();
        data.cleanup();
      }
    });
  },
);
