/**
 * `@support/server/testing`: helpers for the servers' tests (not used by the programs).
 */
import { spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import type { ConfigError } from './options.js';

/** A raw HTTP answer: status line parsed, headers lower-cased, the body as text. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The whole answer as received (empty when the server closed without answering). */
  raw: string;
}

/**
 * Sends `request` verbatim over a fresh TCP connection and reads the answer (until its
 * `content-length` is complete, or until the server closes the connection), for requests no HTTP
 * client would send (`Host: a b`, no Host, `OPTIONS *`, a broken request line).
 * @example
 * const a = await rawHttp(port, 'GET / HTTP/1.1\r\nHost: a b\r\n\r\n');
 * expect(a.status).toBe(400);
 */
export function rawHttp(port: number, request: string | Buffer, host = '127.0.0.1'): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    const chunks: Buffer[] = [];
    let settled = false;
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      const sofar = Buffer.concat(chunks);
      const split = sofar.indexOf('\r\n\r\n');
      if (split === -1) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(sofar.subarray(0, split).toString('latin1'))?.[1];
      if (length !== undefined && sofar.length >= split + 4 + Number(length)) {
        finish();
        socket.destroy();
      }
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A server that answers and then resets the connection still answered.
      if (err.code === 'ECONNRESET' && chunks.length > 0) return;
      if (!settled) reject(err);
    });
    socket.on('close', finish);
    function finish() {
      if (settled) return;
      settled = true;
      const raw = Buffer.concat(chunks).toString('utf8');
      const split = raw.indexOf('\r\n\r\n');
      const head = split === -1 ? raw : raw.slice(0, split);
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0),
        headers,
        body: split === -1 ? '' : raw.slice(split + 4),
        raw,
      });
    }
    socket.write(request);
  });
}

/** The requests Node's parser or the server refuses, that every server must answer in its envelope. */
export const MALFORMED_REQUESTS: Readonly<Record<string, string>> = {
  'Host: a b': 'GET /health HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n',
  'no Host': 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n',
  'OPTIONS *': 'OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
  'bad request line': 'GET\r\n\r\n',
  'bad header': 'GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n',
};

/** What every server answers to each of {@link MALFORMED_REQUESTS}: status, content type, parsed body. */
export async function malformedAnswers(
  port: number,
): Promise<Record<string, { status: number; contentType: string | undefined; body: unknown }>> {
  const out: Record<string, { status: number; contentType: string | undefined; body: unknown }> = {};
  for (const [name, request] of Object.entries(MALFORMED_REQUESTS)) {
    const a = await rawHttp(port, request);
    let body: unknown = a.body;
    try {
      body = JSON.parse(a.body);
    } catch {
      // not JSON: left as text, so that the assertion shows it
    }
    out[name] = { status: a.status, contentType: a.headers['content-type'], body };
  }
  return out;
}

/** Runs a program's bin (`node <bin> ...args`) to completion with only PATH and `env` set. */
export function runBin(
  bin: string,
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

/** The problems a configuration loader reports (`[]` when it accepts). */
export function configProblems(load: () => unknown): readonly string[] {
  try {
    load();
  } catch (err) {
    // By name, not instanceof: dist/testing.js and dist/index.js are separate bundles.
    if (err instanceof Error && err.name === 'ConfigError') return (err as ConfigError).problems;
    throw err;
  }
  return [];
}

/** A parsed `/metrics` scrape (by `parse-prometheus-text-format`, a Prometheus text-format parser). */
export interface MetricsScrape {
  /** Every family, as the parser gives it. */
  readonly families: readonly ParsedFamily[];
  /** The family called `name`, or undefined. */
  family(name: string): ParsedFamily | undefined;
  /**
   * The sum over the samples of `name` whose labels include `labels` (0 when none): a counter's or
   * gauge's value; an unlabelled histogram's `_count`. Throws for a labelled histogram: this parser
   * merges its series into one (`_count` and labels lost), so assert on the companion counter.
   */
  value(name: string, labels?: Record<string, string>): number;
}

/**
 * Fetches `url` (a `/metrics` endpoint), checks it answered 200 in the Prometheus text format, and
 * parses it with a real exposition-format parser (which throws on malformed text).
 * @example
 * const m = await scrapeMetrics(`${url}/metrics`, { authorization: 'Bearer t' });
 * expect(m.value('orchd_http_requests_total', { route: '/v1/hosts' })).toBeGreaterThan(0);
 */
export async function scrapeMetrics(
  url: string,
  headers: Record<string, string> = {},
): Promise<MetricsScrape> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${text.slice(0, 300)}`);
  if (!res.headers.get('content-type')?.startsWith('text/plain; version=0.0.4'))
    throw new Error(`GET ${url}: content-type ${res.headers.get('content-type')}`);
  return parseMetrics(text);
}

/** Parses a Prometheus text exposition (see `scrapeMetrics`). */
export function parseMetrics(text: string): MetricsScrape {
  const families = parsePrometheusTextFormat(text);
  const family = (name: string) => families.find((f) => f.name === name);
  return {
    families,
    family,
    value(name, labels = {}) {
      const f = family(name);
      if (f?.type === 'HISTOGRAM') {
        // Unlabelled, the parser keeps its count; labelled, it merges the series (count lost).
        const only = f.metrics[0];
        if (Object.keys(labels).length > 0 || f.metrics.length !== 1 || only?.count === undefined)
          throw new Error(`${name} is a labelled histogram: assert on its counter`);
        return Number(only.count);
      }
      let total = 0;
      for (const s of f?.metrics ?? []) {
        if (!Object.entries(labels).every(([k, v]) => s.labels?.[k] === v)) continue;
        total += Number(s.value ?? 0);
      }
      return total;
    },
  };
}
