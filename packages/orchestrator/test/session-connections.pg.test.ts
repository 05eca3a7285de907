import { createHash, randomBytes } from 'node:crypto';
import { type Environment, SESSION_MAX_AGE_SECONDS } from '@orch/protocol';
import { EmbeddedPostgres } from '@support/pg';
import { describeOnServerPostgres, describeStores, pgTest, type TestPostgres } from '@support/pg/testing';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { WebSocket } from 'ws';
import { SessionSigner } from '../src/auth/session-cookie.js';
import { type FakeAgent, registerFakeHost } from './fake-agent.js';
import { OrchdProcess, orchdStoreEnv } from './orchd-process.js';

const MASTER = `master-${randomBytes(12).toString('hex')}`;
const AGENT_TOKEN = `agent-${randomBytes(8).toString('hex')}`;
/** How long a test waits for a connection to end (a generous bound on an event, not a measurement). */
const WAIT_MS = 30_000;

/**
 * Connections that outlive the request that opened them (the console WebSocket, `GET /v1/events`,
 * a log follow) end with the browser session or API key that opened them: at logout or key
 * revocation on the same orchd, at the next re-check round (`ORCH_STREAM_RECHECK_SEC`) when it
 * happened elsewhere, and when the session expires. See the README, "Open connections".
 */

/** Logs in and returns the `orch_session=<value>` pair. */
async function login(orchd: OrchdProcess): Promise<string> {
  const r = await orchd.request('POST', '/login', { body: { token: MASTER } });
  expect(r.status).toBe(200);
  return r.headers.get('set-cookie')!.split(';')[0]!;
}

const logout = (orchd: OrchdProcess, cookie: string) =>
  orchd.request('POST', '/logout', { cookie, headers: { 'content-type': 'application/json' }, body: {} });

/** Rejects after `ms` unless `p` settles first. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms);
    p.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

interface Console {
  readonly ws: WebSocket;
  /** Resolves with the close code and reason once the socket closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Sends a line and resolves with the (upper-cased) echo of the fake agent. */
  echo(line: string): Promise<string>;
}

/** Opens environment `id`'s console as the dashboard does (cookie, same origin), and checks it echoes. */
async function openConsole(orchd: OrchdProcess, id: string, cookie: string): Promise<Console> {
  const ws = new WebSocket(`${orchd.url.replace('http', 'ws')}/v1/environments/${id}/attach`, {
    headers: { cookie, origin: orchd.url },
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`console refused: ${res.statusCode}`)));
  });
  const echo = (line: string) =>
    within(
      new Promise<string>((resolve) => {
        ws.once('message', (d: Buffer) => resolve(d.toString()));
        ws.send(Buffer.from(line));
      }),
      WAIT_MS,
      'console echo',
    );
  expect(await echo('hi\n')).toBe('HI\n');
  return { ws, closed, echo };
}

/** The status of a console upgrade with this cookie (refused upgrades answer over HTTP). */
function attachStatus(orchd: OrchdProcess, id: string, cookie: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${orchd.url.replace('http', 'ws')}/v1/environments/${id}/attach`, {
      headers: { cookie, origin: orchd.url },
    });
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('open', () => {
      ws.close();
      reject(new Error('the console upgrade was accepted'));
    });
    ws.once('error', () => undefined);
  });
}

/** Reads a stream to its end; resolves with its text, or rejects when the answer is cut. */
async function readToEnd(reader: ReadableStreamDefaultReader<Uint8Array>, text = ''): Promise<string> {
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += dec.decode(value);
  }
}

/** Reads until `text` contains `wanted`; answers what was read. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, wanted: string): Promise<string> {
  const dec = new TextDecoder();
  let text = '';
  while (!text.includes(wanted)) {
    const { done, value } = await within(reader.read(), WAIT_MS, `waiting for ${JSON.stringify(wanted)}`);
    if (done) throw new Error(`the stream ended before ${JSON.stringify(wanted)}: ${text}`);
    text += dec.decode(value);
  }
  return text;
}

/** A running environment on the fake agent's host. */
async function createEnv(orchd: OrchdProcess): Promise<Environment> {
  const r = await orchd.request('POST', '/v1/environments', {
    token: MASTER,
    body: {
      task_id: 'console',
      spec: { cpus: 1, ram_mb: 512, storage_gb: 1, max_runtime_seconds: 3600 },
      manifest_inline: Buffer.from(
        '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
      ).toString('base64'),
      secrets: {},
      startup_script: '#!/bin/sh\nset -eu\n',
      expose: [],
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const id = (r.body as Environment).id;
  // Set-up runs in beforeAll, where expect.poll is not available.
  for (let i = 0; i < 150; i++) {
    const got = (await orchd.request('GET', `/v1/environments/${id}`, { token: MASTER })).body as Environment;
    if (got.state === 'running') return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`environment ${id} did not reach running`);
}

/** The session id inside a cookie (payload `{sid, exp}` before the MAC). */
function sidOf(cookie: string): string {
  const payload = cookie.split('=')[1]!.split('.')[0]!;
  return (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sid: string }).sid;
}

describeStores('connections opened with a browser session on the %s store, ended on this orchd', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  let env: Environment;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(await openStore(store), await tempDir('orchd-data-')),
      ORCH_AUTH_TOKEN: MASTER,
      // No re-check round and no heartbeat within a test: what ends a connection here is the
      // logout on this orchd itself, or the session's expiry.
      ORCH_STREAM_RECHECK_SEC: '3600',
      ORCH_EVENTS_HEARTBEAT_SEC: '3600',
    });
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    env = await createEnv(orchd);
  });
  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test('logout closes the console opened with that session with 1008 "session ended: logged out"; another session\'s console stays open', async () => {
    const [mine, other] = [await login(orchd), await login(orchd)];
    const a = await openConsole(orchd, env.id, mine);
    const b = await openConsole(orchd, env.id, other);
    expect((await logout(orchd, mine)).status).toBe(200);
    expect(await within(a.closed, WAIT_MS, 'console close')).toEqual({
      code: 1008,
      reason: 'session ended: logged out',
    });
    expect(await b.echo('still here\n')).toBe('STILL HERE\n');
    expect(await attachStatus(orchd, env.id, mine)).toBe(401);
    b.ws.close();
  });

  test('logout ends the event stream opened with the session with an error event, and cuts its log follow', async () => {
    const cookie = await login(orchd);
    const events = await fetch(`${orchd.url}/v1/events`, { headers: { cookie } });
    expect(events.status).toBe(200);
    const eventsReader = events.body!.getReader();
    await readUntil(eventsReader, ': events');
    agent.appendLog(env.id, 'booted\n');
    const follow = await fetch(`${orchd.url}/v1/environments/${env.id}/logs?follow=true`, {
      headers: { cookie },
    });
    expect(follow.status).toBe(200);
    const followReader = follow.body!.getReader();
    await readUntil(followReader, 'booted\n');

    expect((await logout(orchd, cookie)).status).toBe(200);
    const text = await within(readToEnd(eventsReader), WAIT_MS, 'end of the event stream');
    const error = /event: error\ndata: (.*)\n/.exec(text);
    expect(JSON.parse(error![1]!)).toEqual({
      error: {
        code: 'unauthorized',
        message: 'the browser session of this connection was logged out: log in again',
        details: { reason: 'logged_out' },
      },
    });
    // A raw log has no error event: the answer is cut, so no client takes it for the log's end.
    await expect(within(readToEnd(followReader), WAIT_MS, 'end of the log follow')).rejects.toThrow(
      /terminated/,
    );
    const again = await fetch(`${orchd.url}/v1/environments/${env.id}/logs?follow=true`, {
      headers: { cookie },
    });
    expect(again.status).toBe(401);
  });

  test('an exec sent with the session answers 401 instead of its output when the session is logged out meanwhile', async () => {
    const cookie = await login(orchd);
    const gate: { open?: () => void } = {};
    agent.execGate = new Promise<void>((r) => (gate.open = r));
    try {
      const before = agent.execs;
      const answer = orchd.request('POST', `/v1/environments/${env.id}?action=exec`, {
        cookie,
        headers: { 'content-type': 'application/json', origin: orchd.url },
        body: { argv: ['make', 'world'], timeout_seconds: 3600 },
      });
      await expect.poll(() => agent.execs, { timeout: WAIT_MS }).toBe(before + 1);
      expect((await logout(orchd, cookie)).status).toBe(200);
      const r = await within(answer, WAIT_MS, 'exec answer');
      expect([r.status, r.body]).toEqual([
        401,
        {
          error: {
            code: 'unauthorized',
            message: 'the browser session of this connection was logged out: log in again',
            details: { reason: 'logged_out' },
          },
        },
      ]);
    } finally {
      gate.open?.();
      agent.execGate = undefined;
    }
  });

  test('a console opened with a session closes with 1008 "session ended: expired" when the session expires', async () => {
    // A session issued almost 7 days ago: it expires a few seconds from now.
    const issuedAt = Date.now() - SESSION_MAX_AGE_SECONDS * 1000 + 6_000;
    const cookie = `orch_session=${new SessionSigner(MASTER).issue(issuedAt)}`;
    const c = await openConsole(orchd, env.id, cookie);
    expect(await within(c.closed, WAIT_MS, 'console close')).toEqual({
      code: 1008,
      reason: 'session ended: expired',
    });
    expect(await attachStatus(orchd, env.id, cookie)).toBe(401);
  });
});

/**
 * The URL of the store an orchd runs on: the server's, or (embedded) the private PostgreSQL that
 * orchd started under its data dir, reached on its Unix socket.
 */
function storeUrl(databaseUrl: string | undefined, dataDir: string): string {
  if (databaseUrl) return databaseUrl;
  const { socketDir } = EmbeddedPostgres.layout(dataDir, 'orchd');
  return `postgresql://postgres@/postgres?host=${encodeURIComponent(socketDir)}&port=5432`;
}

describeStores('the re-check round on the %s store', (store) => {
  let orchd: OrchdProcess;
  let agent: FakeAgent;
  let env: Environment;
  let url: string;

  pgTest.beforeAll(async ({ openStore, tempDir }) => {
    const opened = await openStore(store);
    const dataDir = await tempDir('orchd-data-');
    orchd = await OrchdProcess.start({
      ...orchdStoreEnv(opened, dataDir),
      ORCH_AUTH_TOKEN: MASTER,
      ORCH_STREAM_RECHECK_SEC: '1',
    });
    url = storeUrl(opened.databaseUrl, dataDir);
    agent = await registerFakeHost(orchd, MASTER, AGENT_TOKEN);
    env = await createEnv(orchd);
  });
  afterAll(async () => {
    await orchd?.stop();
    await agent?.close();
  });

  test('a logout recorded in the store by someone else closes the console at the next round', async () => {
    const cookie = await login(orchd);
    const c = await openConsole(orchd, env.id, cookie);
    // What another orchd's logout writes (revoked-sessions-repo.ts): the SHA-256 of the session id.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(
        `INSERT INTO revoked_sessions (sid_sha256, expires_at) VALUES ($1, now() + interval '7 days')`,
        [createHash('sha256').update(sidOf(cookie)).digest('hex')],
      );
    } finally {
      await client.end();
    }
    expect(await within(c.closed, WAIT_MS, 'console close')).toEqual({
      code: 1008,
      reason: 'session ended: logged out',
    });
  });
});

describeOnServerPostgres('connections on one orchd ended on another orchd sharing the database', () => {
  let server: TestPostgres;
  let a: OrchdProcess;
  let b: OrchdProcess;
  let agent: FakeAgent;
  let env: Environment;

  pgTest.beforeAll(async ({ testPostgres }) => {
    server = testPostgres;
    const shared = {
      DATABASE_URL: await testPostgres.createDatabase('session_connections'),
      TOKEN_ENCRYPTION_KEY: 'ef'.repeat(32),
      ORCH_AUTH_TOKEN: MASTER,
    };
    // `a` re-checks its open connections every second; `b` only ends sessions and keys.
    [a, b] = await Promise.all([
      OrchdProcess.start({ ...shared, ORCH_STREAM_RECHECK_SEC: '1', ORCH_EVENTS_HEARTBEAT_SEC: '3600' }),
      OrchdProcess.start(shared),
    ]);
    agent = await registerFakeHost(a, MASTER, AGENT_TOKEN);
    env = await createEnv(a);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await agent?.close();
  });

  test("a logout on b closes a's console of that session within a's re-check interval, with the reason", async () => {
    const cookie = await login(a);
    const c = await openConsole(a, env.id, cookie);
    expect((await logout(b, cookie)).status).toBe(200);
    expect(await within(c.closed, WAIT_MS, 'console close')).toEqual({
      code: 1008,
      reason: 'session ended: logged out',
    });
  });

  test("a key revoked on b ends a's event stream (error event) and log follow opened with it", async () => {
    const minted = await a.request('POST', '/v1/api-keys', { token: MASTER, body: { label: 'streams' } });
    expect(minted.status).toBe(201);
    const key = minted.body as { id: string; secret: string };
    const headers = { authorization: `Bearer ${key.secret}` };
    const events = await fetch(`${a.url}/v1/events`, { headers });
    const eventsReader = events.body!.getReader();
    await readUntil(eventsReader, ': events');
    agent.appendLog(env.id, 'ready\n');
    const follow = await fetch(`${a.url}/v1/environments/${env.id}/logs?follow=true`, { headers });
    const followReader = follow.body!.getReader();
    await readUntil(followReader, 'ready\n');

    expect((await b.request('DELETE', `/v1/api-keys/${key.id}`, { token: MASTER })).status).toBe(204);
    const text = await within(readToEnd(eventsReader), WAIT_MS, 'end of the event stream');
    expect(text).toMatch(
      /event: error\ndata: \{"error":\{"code":"unauthorized","message":"the API key of this connection was revoked","details":\{"reason":"key_revoked"\}\}\}/,
    );
    await expect(within(readToEnd(followReader), WAIT_MS, 'end of the log follow')).rejects.toThrow(
      /terminated/,
    );
  });

  describe('with the database down', () => {
    test('a re-check round closes nothing and logs a warning without the session; once it is back, a logout elsewhere closes the console', async () => {
      const cookie = await login(a);
      const c = await openConsole(a, env.id, cookie);
      const seen = a.output.length;
      await server.halt();
      try {
        await expect
          .poll(() => a.output.slice(seen).find((l) => l.includes('could not re-check')), {
            timeout: WAIT_MS,
          })
          .toBeDefined();
        // The console does not need the store: still open, still typing into the guest.
        expect(await c.echo('no store\n')).toBe('NO STORE\n');
      } finally {
        await server.resume();
      }
      const warning = a.output.slice(seen).find((l) => l.includes('could not re-check'))!;
      expect(JSON.parse(warning)).toMatchObject({ level: 40, sessions: 1 });
      const value = cookie.split('=')[1]!;
      for (const line of a.output.slice(seen)) {
        expect(line).not.toContain(sidOf(cookie));
        expect(line).not.toContain(value);
      }
      // The pools reconnect by themselves; a logout may meet one still reconnecting (503).
      await expect.poll(async () => (await logout(b, cookie)).status, { timeout: WAIT_MS }).toBe(200);
      expect(await within(c.closed, WAIT_MS, 'console close')).toEqual({
        code: 1008,
        reason: 'session ended: logged out',
      });
    });
  });
});
