import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ApiKey } from '@orch/protocol';
import { IN_CI, pgTest, TestPostgres } from '@support/pg/testing';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, describe, expect, test } from 'vitest';
import { OrchdProcess } from './orchd-process.js';
import { REPO_ROOT } from './run-cli.js';

/**
 * The dashboard's API keys page in real Chromium, against an orchd with a key store (a real
 * PostgreSQL): create a key (its secret shown once, and it works), then revoke it. The screenshot
 * goes to test-artifacts/dashboard/.
 */
const CHROMIUM = '/usr/bin/chromium';
if (IN_CI && (!existsSync(CHROMIUM) || !TestPostgres.available()))
  throw new Error('Chromium and PostgreSQL are required for this suite under CI');
const skip = !existsSync(CHROMIUM) || !TestPostgres.available();
const ARTIFACTS = join(REPO_ROOT, 'test-artifacts', 'dashboard');
const MASTER = 'dashboard-keys-master-token';

describe.skipIf(skip)('the API keys page', () => {
  let orchd: OrchdProcess;
  let browser: Browser;
  let page: Page;

  pgTest.beforeAll(async ({ testPostgres }) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    orchd = await OrchdProcess.start({
      DATABASE_URL: await testPostgres.createDatabase('dashboard_keys'),
      TOKEN_ENCRYPTION_KEY: '34'.repeat(32),
      ORCH_AUTH_TOKEN: MASTER,
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });

  afterAll(async () => {
    await browser?.close();
    await orchd?.stop();
  });

  const keys = async () =>
    ((await orchd.request('GET', '/v1/api-keys', { token: MASTER })).body as { api_keys: ApiKey[] }).api_keys;

  test('create a key: its secret is shown once and works; revoke it', async () => {
    await page.goto(orchd.url);
    await page.waitForURL(`${orchd.url}/login`);
    await page.fill('input[name=token]', MASTER);
    await page.click('button[type=submit]');
    await page.waitForURL(`${orchd.url}/`);
    await page.goto(`${orchd.url}/#/keys`);
    await expect.poll(() => page.textContent('main')).toContain('No API keys.');

    await page.fill('input[name=label]', 'ci job');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    const secret = (await page.textContent('code.secret')) ?? '';
    expect(await page.textContent('main')).toContain('it is shown only this once');
    const [key] = await keys();
    expect(key).toMatchObject({ label: 'ci job' });
    expect(await page.textContent('tbody tr')).toContain(key!.hint);
    expect((await orchd.request('GET', '/v1/hosts', { token: secret })).status).toBe(200);
    await page.screenshot({ path: join(ARTIFACTS, '09-api-keys.png'), fullPage: true });

    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.locator('code.secret').count()).toBe(0);
    await page.locator('tbody tr').getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.textContent('main')).toContain('No API keys.');
    expect(await keys()).toEqual([]);
    expect((await orchd.request('GET', '/v1/hosts', { token: secret })).status).toBe(401);
  });
});
