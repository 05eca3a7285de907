import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Environment, Snapshot } from '@orch/protocol';
import { describeStore, pgTest } from '@support/pg/testing';
import { createParser } from 'eventsource-parser';
import { afterAll, expect, test } from 'vitest';
import { FakeAgent } from './fake-agent.js';
import { validEnvironment, waitForState } from './input-cases.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';
import { orchCli, REPO_ROOT } from './run-cli.js';

const MASTER = `master-${randomBytes(8).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;

interface Received {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

/** An open `GET /v1/events`, collecting events; `until` waits for a condition on them. */
function follow(url: string, headers: Record<string, string>) {
  const events: Received[] = [];
  const ctl = new AbortController();
  let ended = false;
  let status = 0;
  const parser = createParser({
    onEvent: (m) =>
      events.push({ ...(m.id ? { id: m.id } : {}), event: m.event ?? 'message', data: JSON.parse(m.data) }),
  });
  const opened = fetch(`${url}/v1/events`, { headers, signal: ctl.signal }).then(async (res) => {
    status = res.status;
    const reader = res.body!.getReader();
    const text = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(text.decode(value, { stream: true }));
      }
    } catch {
      // aborted
    }
    ended = true;
  });
  return {
    events,
    get ended() {
      return ended;
    },
    get status() {
      return status;
    },
    async until(ok: (e: Received[]) => boolean, what: string) {
      for (let i = 0; i < 200 && !ok(events); i++) await new Promise((r) => setTimeout(r, 50));
      if (!ok(events)) throw new Error(`no ${what} in ${JSON.stringify(events)}`);
    },
    async close() {
      ctl.abort();
      await opened.catch(() => undefined);
    },
  };
}

/** `GET /v1/events` from two orchd processes on one database. */
describeStore('server')('orchd events', () => {
  let a: OrchdProcess;
  let b: OrchdProcess;
  let agent: FakeAgent;
  const as = { token: MASTER };
  const master = { authorization: `Bearer ${MASTER}` };

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const store = await openStore('server');
    const env = {
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_RECONCILE_INTERVAL_SEC: '60',
      ORCH_EVENTS_HEARTBEAT_SEC: '1',
    };
    const shared = orchdStoreEnv(store, await tempDir('orchd-ev-')); // one database, one key
    a = await OrchdProcess.start({ ...shared, ...env });
    b = await OrchdProcess.start({ ...shared, ...env });
    agent = await FakeAgent.start(AGENT_TOKEN);
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await agent?.close();
  });

  test('create, snapshot and delete made on one orchd stream from the other; resumes without loss', async () => {
    const stream = follow(a.url, master);
    await stream.until(() => stream.status === 200, 'answer');
    const reg = await b.request('POST', '/v1/hosts', {
      ...as,
      body: { id: 'h1', kind: 'microvm', agent_url: agent.url, agent_token: AGENT_TOKEN },
    });
    expect(reg.status).toBe(201);
    await stream.until(
      (e) => e.some((x) => x.event === 'host.created' && x.data.id === 'h1'),
      'host.created',
    );

    const created = await b.request('POST', '/v1/environments', { ...as, body: validEnvironment() });
    expect(created.status).toBe(201);
    const id = (created.body as Environment).id;
    await waitForState(b, MASTER, id, 'running');
    await stream.until(
      (e) =>
        e.some((x) => x.event === 'environment.updated' && x.data.id === id && x.data.state === 'running'),
      'environment running',
    );
    const mine = stream.events.filter((x) => x.data.id === id);
    expect(mine[0]).toMatchObject({
      event: 'environment.created',
      data: { id, state: 'creating', host_id: 'h1' },
    });
    expect(JSON.stringify(stream.events)).not.toContain('secrets');
    const ids = stream.events.map((x) => Number(x.id));
    expect(ids).toEqual([...ids].sort((p, q) => p - q));

    // The connection drops; meanwhile a snapshot is taken and the environment deleted.
    const lastSeen = stream.events.at(-1)!.id!;
    await stream.close();
    const snap = await b.request('POST', `/v1/environments/${id}/snapshots`, { ...as, body: {} });
    expect(snap.status).toBe(201);
    const snapId = (snap.body as Snapshot).id;
    expect((await b.request('DELETE', `/v1/snapshots/${snapId}`, as)).status).toBe(204);
    expect((await b.request('DELETE', `/v1/environments/${id}`, as)).status).toBeLessThan(300);

    const resumed = follow(a.url, { ...master, 'last-event-id': lastSeen });
    await resumed.until(
      (e) => e.some((x) => x.event === 'snapshot.deleted' && x.data.id === snapId),
      'snapshot.deleted',
    );
    await resumed.until(
      (e) =>
        e.some(
          (x) =>
            x.event === 'environment.updated' &&
            x.data.id === id &&
            ['stopping', 'stopped'].includes(x.data.state as string),
        ),
      'environment stopping',
    );
    const types = resumed.events.filter((x) => x.data.id === snapId).map((x) => x.event);
    expect(types[0]).toBe('snapshot.created');
    expect(types).toContain('snapshot.updated');
    expect(Number(resumed.events[0]!.id)).toBe(Number(lastSeen) + 1);
    await resumed.close();
  });

  test('heartbeats; a revoked key gets an error event and the stream ends', async () => {
    const minted = await a.request('POST', '/v1/api-keys', { ...as, body: { label: 'events' } });
    expect(minted.status).toBe(201);
    const key = minted.body as { id: string; secret: string };
    const raw = await fetch(`${a.url}/v1/events`, { headers: { authorization: `Bearer ${key.secret}` } });
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toContain('text/event-stream');
    const reader = raw.body!.getReader();
    let text = '';
    const dec = new TextDecoder();
    while (!text.includes(': heartbeat')) text += dec.decode((await reader.read()).value);
    expect((await b.request('DELETE', `/v1/api-keys/${key.id}`, as)).status).toBe(204);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += dec.decode(value);
    }
    expect(text).toMatch(/event: error\ndata: \{"error":\{"code":"unauthorized"/);
  });

  test('orch events prints the stream as JSON lines from --after, and ends with status 1 when its key is revoked', async () => {
    const config = mkdtempSync(join(tmpdir(), 'orch-events-cli-'));
    try {
      const minted = await a.request('POST', '/v1/api-keys', { ...as, body: { label: 'cli-events' } });
      const key = minted.body as { id: string; secret: string };
      expect((await orchCli(config, 'connect', a.url, '--token', key.secret)).code).toBe(0);
      const cli = spawn(
        process.execPath,
        [
          fileURLToPath(new URL('../../cli/bin/orch.js', import.meta.url)),
          'events',
          '--after',
          '0',
          '--type',
          'host.',
        ],
        {
          cwd: REPO_ROOT,
          env: { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: config, HOME: '/nonexistent' },
        },
      );
      let stdout = '';
      let stderr = '';
      cli.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      cli.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => cli.once('exit', (code) => r(code)));
      for (let i = 0; i < 200 && !stdout.includes('\n'); i++) await new Promise((r) => setTimeout(r, 50));
      const first = JSON.parse(stdout.split('\n')[0]!) as { id: number; type: string; data: { id: string } };
      expect(first).toMatchObject({ type: 'host.created', data: { id: 'h1' } });
      expect(first.id).toBeGreaterThan(0);
      expect((await a.request('DELETE', `/v1/api-keys/${key.id}`, as)).status).toBe(204);
      expect(await exited).toBe(1);
      expect(stderr).toContain('(unauthorized)');
      expect(
        stdout
          .split('\n')
          .filter(Boolean)
          .every((l) => (JSON.parse(l) as { type: string }).type.startsWith('host.')),
      ).toBe(true);
    } finally {
      rmSync(config, { recursive: true, force: true });
    }
  });

  test('streams that closed leave no listener behind (no leak warning after many)', async () => {
    // Each stream listens for orchd's shutdown; one that forgot to stop listening would pile up
    // listeners on a process-long signal, and Node warns past ten.
    for (let i = 0; i < 15; i++) {
      const stream = follow(a.url, master);
      await stream.until(() => stream.status === 200, 'answer');
      await stream.close();
    }
    const warnings = a.output.filter((l) => /MaxListenersExceeded|memory leak detected/i.test(l));
    expect(warnings).toEqual([]);
  });

  test('a bad Last-Event-ID and a missing credential are refused in the envelope', async () => {
    const bad = await a.request('GET', '/v1/events', { ...as, headers: { 'last-event-id': 'abc' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'invalid_argument' } });
    expect((await a.request('GET', '/v1/events')).status).toBe(401);
  });

  test('a cursor past the newest event id is refused, naming it; the newest itself resumes', async () => {
    const future = '999999999999999999';
    const after = await a.request('GET', `/v1/events?after=${future}`, as);
    expect(after.status).toBe(400);
    expect(after.body).toMatchObject({
      error: {
        code: 'invalid_argument',
        message: expect.stringMatching(/^after: 999999999999999999 is past the newest event id, \d+$/),
        details: { field: 'after' },
      },
    });
    const header = await b.request('GET', '/v1/events', { ...as, headers: { 'last-event-id': future } });
    expect(header.status).toBe(400);
    expect(header.body).toMatchObject({
      error: {
        code: 'invalid_argument',
        message: expect.stringMatching(/^Last-Event-ID: 999999999999999999 is past the newest event id/),
      },
    });
    const newest = (after.body as { error: { details: { newest: number } } }).error.details.newest;
    expect(newest).toBeGreaterThan(0);
    const resumed = follow(a.url, { ...master, 'last-event-id': String(newest) });
    await resumed.until(() => resumed.status === 200, 'answer');
    await resumed.close();
  });
});
