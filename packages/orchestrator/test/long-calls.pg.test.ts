import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Environment } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { afterAll, expect, test } from 'vitest';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

/**
 * Calls whose answer waits for an agent longer than the CLI's default 30 s deadline: `orch exec
 * --timeout 120` of a command that ends after 31 s, and `orch env pause` of a VM whose memory
 * takes 31 s to save, both pass `orch` → `orchd` → agent (an agent double that answers only then)
 * and succeed. Before, the CLI gave up at 30 s (`no complete answer within 30 s`). Nothing here is
 * about the store, so it runs on one.
 */
describeStore('embedded')('calls that outlast 30 s', () => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  const config = mkdtempSync(join(tmpdir(), 'orch-long-cli-'));
  const orch = (...args: string[]) => orchCli(config, ...args);
  const as = { token: MASTER };
  const LONGER_THAN_30_S = 31_000;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore('embedded'), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    expect((await orch('connect', orchd.url, '--token', MASTER, '--master')).code).toBe(0);
  });

  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
    rmSync(config, { recursive: true, force: true });
  });

  const running = async (task: string): Promise<Environment> => {
    const created = await orchd.request('POST', '/v1/environments', {
      ...as,
      body: {
        task_id: task,
        spec: { cpus: 1, ram_mb: 256, storage_gb: 1, max_runtime_seconds: 3600 },
        manifest_inline: Buffer.from('{"version":"1"}').toString('base64'),
        startup_script: 'true\n',
      },
    });
    expect(created.status).toBe(201);
    const id = (created.body as Environment).id;
    await expect
      .poll(
        async () => ((await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment).state,
      )
      .toBe('running');
    return (await orchd.request('GET', `/v1/environments/${id}`, as)).body as Environment;
  };

  test('orch exec --timeout 120 of a 31 s command, and a 31 s pause, succeed', {
    timeout: 180_000,
  }, async () => {
    const [a, b] = await Promise.all([running('exec'), running('pause')]);
    const gate = new Promise<void>((r) => setTimeout(r, LONGER_THAN_30_S));
    agent.execGate = gate;
    agent.pauseGate = gate;
    try {
      const [exec, pause] = await Promise.all([
        orch('exec', a.id, '--timeout', '120', '--', 'echo', 'done'),
        orch('-o', 'json', 'env', 'pause', b.id),
      ]);
      expect(exec).toEqual({ code: 0, stdout: 'echo done\n', stderr: '' });
      expect(pause.stderr).toBe('');
      expect(pause.code).toBe(0);
      expect(JSON.parse(pause.stdout)).toMatchObject({ id: b.id, state: 'paused' });
    } finally {
      agent.execGate = undefined;
      agent.pauseGate = undefined;
    }
  });
});
