/**
 * Thousands of malformed requests (bodies, headers, procedures, raw HTTP): the node answers every
 * one with the envelope and a status from the spec's table, never 500, and stays healthy.
 */
import { connect } from 'node:net';
import { ERROR_TAGS, PROCEDURES, wireEnvelopeSchema } from '@board/protocol';
import { mintToken } from '@board/server';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { boardTest, cli, type NodeProcess, rpc, TOKEN_SECRET, tag, value } from './fixtures.js';

const SEED = 20261121;
const RUNS = 3000;

describe('fuzz: malformed bodies and headers get envelope answers only', () => {
  let node: NodeProcess;
  let dir: string;
  let token: string;
  let readOnly: string;

  boardTest.beforeAll(async ({ tempDir, startNode }) => {
    dir = await tempDir('board-fuzz-');
    const env = { BOARD_DATA_DIR: dir, BOARD_TOKEN_SECRET: TOKEN_SECRET };
    expect(
      (await cli(['board', 'create', 'fuzz', '--column', 'n:INTEGER', '--column', 'title:TEXT'], env)).code,
    ).toBe(0);
    node = await startNode({ ...env, BOARD_AUTH: 'on' });
    token = await mintToken(TOKEN_SECRET, { boards: ['fuzz'], verbs: ['read', 'write'], ttlSec: 3600 });
    readOnly = await mintToken(TOKEN_SECRET, { boards: ['fuzz'], verbs: ['read'], ttlSec: 3600 });
  });

  /** Rows of the fuzz board whose id starts with `prefix` (what a refused request must not have written). */
  const idsStartingWith = async (prefix: string) =>
    value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT count(*) FROM {{t}} WHERE starts_with(id, $1)', tables: T, params: [prefix] },
        { board: 'fuzz', token },
      ),
    ).result.rows;

  const headerText = fc.string({ maxLength: 80 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
  const validBodies = [
    { rows: [{ id: 'a', n: 1 }] },
    { updates: [{ id: 'a', patch: { n: 2 } }] },
    { ids: ['a'] },
    { sql: 'SELECT * FROM {{t}}', tables: [{ token: 't', entity: 'items' }], params: [] },
    { after: 0, limit: 10 },
    {},
  ];

  const body = fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.string({ maxLength: 200 }),
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
    fc
      .tuple(fc.constantFrom(...validBodies), fc.string({ maxLength: 12 }), fc.jsonValue())
      .map(([b, k, v]) => JSON.stringify({ ...b, [k]: v })),
    fc
      .tuple(fc.constantFrom(...validBodies), fc.jsonValue())
      .map(([b, v]) => JSON.stringify(Object.fromEntries(Object.keys(b).map((k) => [k, v])))),
    fc
      .constantFrom(...validBodies)
      .chain((b) => fc.nat({ max: JSON.stringify(b).length }).map((n) => JSON.stringify(b).slice(0, n))),
    fc.nat({ max: 5000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
    fc
      .string({ maxLength: 300 })
      .map((sql) => JSON.stringify({ sql, tables: [{ token: 't', entity: 'items' }] })),
    fc
      .array(fc.record({ id: fc.string({ maxLength: 5 }), n: fc.jsonValue(), title: fc.jsonValue() }), {
        maxLength: 5,
      })
      .map((rows) => JSON.stringify({ rows })),
  );

  const cell = fc.oneof(
    fc.string({ maxLength: 10 }),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
  );
  const row = fc.record(
    { id: fc.string({ minLength: 1, maxLength: 6 }), n: cell, title: cell },
    { requiredKeys: ['id'] },
  );
  /** Bodies that pass the input schema, with arbitrary content: they reach the handlers. */
  const wellFormed = fc.oneof(
    fc.record({
      procedure: fc.constant('mutate.insert'),
      body: fc.array(row, { minLength: 1, maxLength: 4 }).map((rows) => JSON.stringify({ rows })),
    }),
    fc.record({
      procedure: fc.constant('mutate.update'),
      body: fc
        .array(
          fc.record({
            id: fc.string({ minLength: 1, maxLength: 6 }),
            patch: fc.dictionary(fc.constantFrom('n', 'title', 'state', 'x', 'id'), cell),
          }),
          { minLength: 1, maxLength: 3 },
        )
        .map((updates) => JSON.stringify({ updates, idempotencyKey: 'fuzz-update' })),
    }),
    fc.record({
      procedure: fc.constant('mutate.delete'),
      body: fc
        .array(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 1 })
        .map((ids) => JSON.stringify({ ids })),
    }),
    fc.record({
      procedure: fc.constant('query.execute'),
      body: fc
        .tuple(
          fc.oneof(
            fc.string({ minLength: 1, maxLength: 200 }),
            fc.constantFrom('SELECT * FROM {{t}} WHERE id = $1', 'SELECT $1, $2', 'SELECT n + $1 FROM {{t}}'),
          ),
          fc.array(cell, { maxLength: 3 }),
          fc.option(fc.nat({ max: 10_000 })),
        )
        .map(([sql, params, min]) =>
          JSON.stringify({
            sql,
            tables: [{ token: 't', entity: 'items' }],
            params,
            ...(min === null ? {} : { minWatermark: min }),
          }),
        ),
    }),
    fc.record({
      procedure: fc.constant('changes.read'),
      body: fc
        .record({ after: fc.nat({ max: 1_000_000 }), limit: fc.integer({ min: 1, max: 1000 }) })
        .map((b) => JSON.stringify(b)),
    }),
    fc.record({ procedure: fc.constant('node.stats'), body: fc.constantFrom('', '{}') }),
  );
  const request = fc.oneof(
    wellFormed.map((w) => ({
      ...w,
      board: 'fuzz',
      auth: 'good',
      contentType: 'application/json',
      idempotent: null,
    })),
    fc.record({
      procedure: fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...Object.keys(PROCEDURES)) },
        { weight: 1, arbitrary: fc.string({ maxLength: 30 }).map((s) => encodeURIComponent(s)) },
      ),
      board: fc.oneof(fc.constant('fuzz'), fc.constant(undefined), headerText),
      auth: fc.oneof(
        fc.constant('good'),
        fc.constant('read'),
        fc.constant(undefined),
        headerText,
        headerText.map((t) => `Bearer ${t}`),
      ),
      contentType: fc.oneof(fc.constant('application/json'), headerText),
      idempotent: fc.option(headerText),
      body,
    }),
  );

  it(`answers ${RUNS} generated requests with envelopes and spec statuses, never 500`, async () => {
    const samples = fc.sample(request, { numRuns: RUNS, seed: SEED });
    const statuses = new Map<number, number>();
    const problems: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < samples.length) {
          const s = samples[next++];
          if (!s) break;
          const headers: Record<string, string> = { 'content-type': s.contentType };
          if (s.board !== undefined) headers['x-data-board'] = s.board;
          if (s.auth === 'good') headers.authorization = `Bearer ${token}`;
          else if (s.auth === 'read') headers.authorization = `Bearer ${readOnly}`;
          else if (s.auth !== undefined) headers.authorization = s.auth;
          if (s.idempotent !== null) headers['x-data-idempotent'] = s.idempotent;
          const res = await fetch(`${node.url}/rpc/${s.procedure}`, {
            method: 'POST',
            headers,
            body: s.body,
          });
          const text = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          let envelope: ReturnType<typeof wireEnvelopeSchema.safeParse>;
          try {
            envelope = wireEnvelopeSchema.safeParse(JSON.parse(text));
          } catch {
            problems.push(`not JSON (${res.status}): ${text.slice(0, 100)}`);
            continue;
          }
          if (!envelope.success) problems.push(`not an envelope: ${text.slice(0, 100)}`);
          if (text.includes(dir)) problems.push(`host path disclosed: ${text.slice(0, 100)}`);
          if (![200, 400, 401, 403, 404].includes(res.status))
            problems.push(`status ${res.status}: ${text.slice(0, 100)}`);
          if (!res.headers.get('content-type')?.includes('application/json')) problems.push('content type');
          if (res.status !== 200 && envelope.success) {
            const e = envelope.data;
            if (e.status !== 'error') problems.push(`non-200 ok: ${text.slice(0, 100)}`);
            else if (ERROR_TAGS[e.error._tag as keyof typeof ERROR_TAGS] !== res.status) {
              problems.push(`tag ${e.error._tag} with status ${res.status}`);
            }
          }
          if (
            envelope.success &&
            envelope.data.status === 'error' &&
            envelope.data.error._tag === 'Internal'
          ) {
            problems.push(`Internal: ${text.slice(0, 200)}`);
          }
        }
      }),
    );
    expect(problems).toEqual([]);
    // The generator reaches both sides of the wall: handlers that ran and early refusals.
    expect(statuses.get(200)).toBeGreaterThan(100);
    expect(statuses.get(400)).toBeGreaterThan(100);
    expect(statuses.get(401)).toBeGreaterThan(100);
    // A hang guard, not a speed bound: 3000 requests took over 60 s in a loaded run.
  }, 240_000);

  it('answers 300 generated /watch requests with a stream or an envelope', async () => {
    const watchRequest = fc.record({
      after: fc.oneof(
        fc.constant(undefined),
        fc.nat({ max: 100 }).map(String),
        headerText.map(encodeURIComponent),
      ),
      board: fc.oneof(fc.constant('fuzz'), fc.constant(undefined), headerText),
      auth: fc.oneof(fc.constant('good'), fc.constant(undefined), headerText),
    });
    for (const s of fc.sample(watchRequest, { numRuns: 300, seed: SEED })) {
      const headers: Record<string, string> = {};
      if (s.board !== undefined) headers['x-data-board'] = s.board;
      if (s.auth === 'good') headers.authorization = `Bearer ${token}`;
      else if (s.auth !== undefined) headers.authorization = s.auth;
      const ctl = new AbortController();
      const q = s.after === undefined ? '' : `?after=${s.after}`;
      const res = await fetch(`${node.url}/watch${q}`, { headers, signal: ctl.signal });
      expect([200, 400, 401, 403]).toContain(res.status);
      if (res.status === 200) {
        expect(res.headers.get('content-type')).toContain('text/event-stream');
        ctl.abort();
        continue;
      }
      const env = wireEnvelopeSchema.parse(await res.json());
      expect(env.status).toBe('error');
    }
  });

  it('answers malformed HTTP on the socket with a 400 envelope', async () => {
    const garbage = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 300 }), { numRuns: 100, seed: SEED });
    const fixed = [
      'GARBAGE\r\n\r\n',
      'POST /rpc/node.stats HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      'POST /rpc/node.stats HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n',
      `GET /${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    ].map((s) => Buffer.from(s));
    for (const payload of [
      ...fixed,
      ...garbage.map((g) => Buffer.concat([Buffer.from(g), Buffer.from('\r\n\r\n')])),
    ]) {
      const answer = await rawHttp(node.url, payload);
      if (answer === '') continue; // closed without an answer (e.g. nothing parseable arrived)
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      expect([200, 400, 401, 403, 404, 431]).toContain(status);
      if (status === 400) expect(answer).toContain('"status":"error"');
    }
  });

  const T = [{ token: 't', entity: 'items' }];
  /** Text that breaks the text rule or the id patterns, and what the message must name. */
  const badText = fc.oneof(
    fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => ({
      text: `${a}\u0000${b}`,
      rule: /must not contain NUL \(U\+0000\)/,
    })),
    fc.tuple(fc.string({ maxLength: 8 }), fc.constantFrom('\ud800', '\udfff')).map(([a, s]) => ({
      text: `${a}${s}`,
      rule: /must be well-formed Unicode/,
    })),
  );
  const overlongId = fc
    .oneof(fc.integer({ min: 257, max: 4000 }), fc.constant(1_000_000))
    .map((n) => ({ text: 'x'.repeat(n), rule: /row ids are 1 to 256 characters/ }));
  /** [procedure, body, where the message must point] for one piece of bad text in every place text goes. */
  const badRequest = fc.oneof(
    fc
      .oneof(badText, overlongId)
      .map((b) => ['mutate.insert', { rows: [{ id: b.text }] }, 'rows.0.id', b] as const),
    badText.map(
      (b) => ['mutate.insert', { rows: [{ id: 'ok', title: b.text }] }, 'rows.0.title', b] as const,
    ),
    badText.map((b) => ['mutate.insert', { rows: [{ id: 'ok', [b.text]: 1 }] }, 'rows.0', b] as const),
    badText.map(
      (b) =>
        ['mutate.insert', { rows: [{ id: 'ok' }], idempotencyKey: b.text }, 'idempotencyKey', b] as const,
    ),
    fc
      .oneof(badText, overlongId)
      .map((b) => ['mutate.update', { updates: [{ id: b.text, patch: {} }] }, 'updates.0.id', b] as const),
    badText.map(
      (b) =>
        [
          'mutate.update',
          { updates: [{ id: 'ok', patch: { state: b.text } }] },
          'updates.0.patch.state',
          b,
        ] as const,
    ),
    fc.oneof(badText, overlongId).map((b) => ['mutate.delete', { ids: ['ok', b.text] }, 'ids.1', b] as const),
    badText.map(
      (b) => ['mutate.delete', { ids: ['ok'], idempotencyKey: b.text }, 'idempotencyKey', b] as const,
    ),
    badText.map((b) => ['query.execute', { sql: `SELECT '${b.text}'`, tables: T }, 'sql', b] as const),
    badText.map(
      (b) => ['query.execute', { sql: 'SELECT $1', tables: T, params: [b.text] }, 'params.0', b] as const,
    ),
  );

  it('answers NUL, lone surrogates and overlong ids anywhere with a precise InvalidInput, never a store error', async () => {
    const problems: string[] = [];
    for (const [procedure, body, where, bad] of fc.sample(badRequest, { numRuns: 300, seed: SEED })) {
      const a = await rpc(node.url, procedure, body, { board: 'fuzz', token });
      const message = a.body.status === 'error' ? a.body.error.message : '';
      if (
        a.status !== 400 ||
        tag(a) !== 'InvalidInput' ||
        !message.includes(`input at ${where}: `) ||
        !bad.rule.test(message)
      ) {
        problems.push(`${procedure} ${where}: ${a.status} ${a.text.slice(0, 160)}`);
      }
      if (/SQLSTATE|index row|invalid byte sequence|unsupported Unicode/i.test(a.text))
        problems.push(`store text: ${a.text.slice(0, 160)}`);
    }
    expect(problems).toEqual([]);
    // Longest ids that follow the pattern are stored and read back.
    const longest = '\u{1F600}'.repeat(256);
    value(
      await rpc(node.url, 'mutate.insert', { rows: [{ id: longest, title: 'é' }] }, { board: 'fuzz', token }),
    );
    const back = value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        { sql: 'SELECT title FROM {{t}} WHERE id = $1', tables: T, params: [longest] },
        { board: 'fuzz', token },
      ),
    );
    expect(back.result.rows).toEqual([['é']]);
  });

  it('answers dot-segment, encoded, doubled-slash and trailing-slash procedure paths as unknown, running nothing', async () => {
    const procedures = Object.keys(PROCEDURES);
    const variant = fc
      .tuple(fc.constantFrom(...procedures), fc.constantFrom(...procedures))
      .chain(([from, to]) =>
        fc.constantFrom(
          `/rpc/${from}/../${to}`,
          `/rpc/${from}/%2e%2e/${to}`,
          `/rpc/${from}/%2E%2E/${to}`,
          `/rpc/${from}/.%2e/${to}`,
          `/rpc/./${to}`,
          `/rpc/%2e/${to}`,
          `/rpc//${to}`,
          `//rpc/${to}`,
          `/rpc/${to}/`,
          `/x/../rpc/${to}`,
          `/rpc/${to.replace('.', '%2E')}`,
          `/rpc/${to.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`)}`,
        ),
      );
    const seen = new Set<string>();
    for (const path of fc.sample(variant, { numRuns: 200, seed: SEED })) {
      if (seen.has(path)) continue;
      seen.add(path);
      const body = JSON.stringify({ rows: [{ id: `evil-${seen.size}` }], ids: ['after-fuzz'] });
      const answer = await rawHttp(
        node.url,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nx-data-board: fuzz\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
      expect(answer, path).toMatch(/^HTTP\/1\.1 404 /);
      expect(answer, path).toMatch(/"_tag":"(UnknownProcedure|NotFound)"/);
    }
    expect(seen.size).toBeGreaterThan(50);
    expect(await idsStartingWith('evil-')).toEqual([[0]]);
  });

  it('refuses bodies past 64 MiB, declared or streamed, and a body cut off mid-way, with InvalidInput', async () => {
    const limit = 64 * 1024 * 1024;
    const head = (extra: string) =>
      `POST /rpc/mutate.insert HTTP/1.1\r\nHost: x\r\nx-data-board: fuzz\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\n${extra}connection: close\r\n\r\n`;
    // Declared too large: refused before any of it is read.
    const declared = await rawHttp(node.url, head(`content-length: ${limit + 1}\r\n`), { keepOpen: true });
    expect(declared).toMatch(/^HTTP\/1\.1 400 /);
    expect(declared).toContain(`request body larger than ${limit} bytes`);
    // Streamed (chunked, no length) past the bound: refused once it crosses it.
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const chunkFrame = Buffer.concat([
      Buffer.from(`${chunk.length.toString(16)}\r\n`),
      chunk,
      Buffer.from('\r\n'),
    ]);
    const streamed = await rawHttp(
      node.url,
      Buffer.concat([
        Buffer.from(head('transfer-encoding: chunked\r\n')),
        ...Array.from({ length: 65 }, () => chunkFrame),
        Buffer.from('0\r\n\r\n'),
      ]),
    );
    expect(streamed).toMatch(/^HTTP\/1\.1 400 /);
    expect(streamed).toContain(`request body larger than ${limit} bytes`);
    // A client that goes away mid-body: nothing is written, the node carries on (next test).
    const { port, hostname } = new URL(node.url);
    await new Promise<void>((resolve) => {
      const sock = connect(Number(port), hostname, () => {
        sock.write(`${head('content-length: 1000\r\n')}{"rows":[{"id":"cut-`);
        setTimeout(() => sock.destroy(), 100);
      });
      sock.on('close', () => resolve());
      sock.on('error', () => resolve());
    });
    expect(await idsStartingWith('cut-')).toEqual([[0]]);
  });

  it('refuses nesting past 64 levels with InvalidInput before parsing it, /health answering meanwhile', async () => {
    const call = (raw: string) => rpc(node.url, 'query.execute', undefined, { board: 'fuzz', token, raw });
    // 40 MB of brackets: JSON.parse alone took 25 s on it, with the event loop blocked.
    const huge = `${'['.repeat(20e6)}${']'.repeat(20e6)}`;
    let answered = false;
    const deep = call(huge).finally(() => {
      answered = true;
    });
    let healthDuring = 0;
    while (!answered) {
      const res = await fetch(`${node.url}/health`);
      expect(res.status).toBe(200);
      await res.text();
      if (!answered) healthDuring++;
    }
    const a = await deep;
    expect([a.status, tag(a)]).toEqual([400, 'InvalidInput']);
    expect(a.text).toContain('deeper than 64 levels');
    expect(healthDuring).toBeGreaterThan(0);
    // Brackets inside strings do not count; 64 levels are still JSON, refused by the schema.
    const inString = await call(JSON.stringify({ sql: `SELECT '${'['.repeat(1000)}'`, tables: [] }));
    expect(tag(inString)).toBe('ok');
    const at64 = await call(`${'['.repeat(64)}${']'.repeat(64)}`);
    expect([at64.status, tag(at64)]).toEqual([400, 'InvalidInput']);
    expect(at64.text).toContain('invalid query.execute input');
    const objects = await call(`{"sql":${'{"a":'.repeat(65)}1${'}'.repeat(65)}}`);
    expect(objects.text).toContain('deeper than 64 levels');
  });

  it('is still healthy afterwards: /health, a write and a read', async () => {
    expect(node.proc.exitCode).toBe(null);
    expect((await fetch(`${node.url}/health`)).status).toBe(200);
    const w = value<{ watermark: number }>(
      await rpc(node.url, 'mutate.insert', { rows: [{ id: 'after-fuzz', n: 1 }] }, { board: 'fuzz', token }),
    );
    const out = value<{ result: { rows: unknown[][] } }>(
      await rpc(
        node.url,
        'query.execute',
        {
          sql: "SELECT n FROM {{t}} WHERE id = 'after-fuzz'",
          tables: [{ token: 't', entity: 'items' }],
          minWatermark: w.watermark,
        },
        { board: 'fuzz', token },
      ),
    );
    expect(out.result.rows).toEqual([[1]]);
  });
});

/** Sends raw bytes to the node (fetch would normalise the path first) and collects the answer. */
/**
 * Sends `payload` on a fresh socket and resolves with everything received until the connection
 * closes (or 2 s of silence). `keepOpen`: the client does not end its side after the payload (a
 * body still to come), so the answer is to the request as declared, not to an early end of input.
 */
function rawHttp(
  url: string,
  payload: string | Buffer,
  options: { keepOpen?: boolean } = {},
): Promise<string> {
  const { port, hostname } = new URL(url);
  return new Promise<string>((resolve) => {
    const sock = connect(Number(port), hostname);
    let got = '';
    sock.setTimeout(2000, () => sock.destroy());
    sock.on('data', (d) => {
      got += String(d);
    });
    sock.on('close', () => resolve(got));
    sock.on('error', () => resolve(got));
    if (options.keepOpen) sock.write(payload);
    else sock.end(payload);
  });
}
