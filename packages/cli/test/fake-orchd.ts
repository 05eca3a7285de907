import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test as base } from 'vitest';

/** What the fake orchd does with one request. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A tiny `node:http` orchd that answers however the test says, and records what it was asked. */
export interface FakeOrchd {
  readonly url: string;
  /** `METHOD /path?query` of every request, in order. */
  readonly requests: string[];
  /** Replaces the answer to every later request. */
  answer(handler: Handler): void;
}

/** A directory for `XDG_CONFIG_HOME`, with a contexts file written by `contexts()`. */
export interface ConfigDir {
  readonly dir: string;
  readonly file: string;
  /** Writes `text` as the contexts file. */
  write(text: string): void;
  /** Writes a contexts file whose current context `t` is `url` (master token `tok`). */
  connectTo(url: string): void;
}

/**
 * `orchd` and `config` fixtures: each test gets its own server and contexts directory, and both
 * are gone after it.
 */
export const test = base.extend<{ orchd: FakeOrchd; config: ConfigDir }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  orchd: async ({}, use) => {
    const requests: string[] = [];
    let handler: Handler = (_req, res) => res.writeHead(500).end();
    const server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      handler(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    await use({ url, requests, answer: (h) => (handler = h) });
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  },
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  config: async ({}, use) => {
    const dir = mkdtempSync(join(tmpdir(), 'orch-cli-config-'));
    const file = join(dir, 'orch', 'config.json');
    const write = (text: string) => {
      mkdirSync(join(dir, 'orch'), { recursive: true, mode: 0o700 });
      writeFileSync(file, text, { mode: 0o600 });
    };
    await use({
      dir,
      file,
      write,
      connectTo: (url) =>
        write(JSON.stringify({ current: 't', contexts: { t: { url, token: 'tok', master: true } } })),
    });
    rmSync(dir, { recursive: true, force: true });
  },
});

/** Answers `status` with `body` as JSON text (given as is when a string). */
export const json =
  (body: unknown, status = 200): Handler =>
  (_req, res) =>
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(typeof body === 'string' ? body : JSON.stringify(body));
