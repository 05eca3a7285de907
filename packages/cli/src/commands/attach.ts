import { Readable } from 'node:stream';
import WebSocket from 'ws';
import { apiErrorFromResponse, OrchClient } from '../api-client.js';
import { ContextStore } from '../context-store.js';
import { CliError } from '../errors.js';
import { ENVIRONMENT_ID, idSegment } from '../ids.js';
import { contextsFile } from '../settings.js';

/** Ctrl-] detaches, as in telnet. */
const DETACH = 0x1d;

/**
 * `orch attach <env>`: the guest's serial console in this terminal (raw mode when it is one).
 * Ctrl-] detaches; the VM keeps running.
 */
export async function attach(id: string): Promise<number> {
  const segment = idSegment(ENVIRONMENT_ID, id);
  const { context } = await new ContextStore(contextsFile()).current();
  const url = `${context.url.replace(/^http/, 'ws')}/v1/environments/${segment}/attach`;
  const ws = new WebSocket(url, {
    headers: context.token ? { authorization: `Bearer ${context.token}` } : {},
    followRedirects: false,
    handshakeTimeout: 15_000,
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    // A refused upgrade: its error answer is read as every answer is (OrchClient#readAll: capped,
    // a cut-short body a transport error) and mapped by the one function, apiErrorFromResponse.
    ws.once('unexpected-response', (req, res) => {
      const length = res.headers['content-length'];
      const answer = new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, {
        headers: length === undefined ? {} : { 'content-length': length },
      });
      new OrchClient(context)
        .readAll(answer)
        .then((body) => apiErrorFromResponse(res.statusCode ?? 0, new TextDecoder().decode(body)))
        .then(reject, reject)
        .finally(() => req.destroy());
    });
    ws.once('error', (err) => reject(new CliError(`orch: cannot attach: ${err.message}`)));
  });
  const stdin = process.stdin;
  const raw = stdin.isTTY;
  if (raw) stdin.setRawMode(true);
  process.stderr.write(`orch: attached to ${id}; Ctrl-] detaches\r\n`);
  return new Promise<number>((resolve) => {
    const finish = (code: number) => {
      if (raw) stdin.setRawMode(false);
      stdin.pause();
      resolve(code);
    };
    stdin.on('data', (chunk: Buffer) => {
      const at = chunk.indexOf(DETACH);
      if (at >= 0) {
        if (at > 0) ws.send(chunk.subarray(0, at));
        process.stderr.write('\r\norch: detached\r\n');
        ws.close();
        return;
      }
      ws.send(chunk);
    });
    stdin.on('end', () => ws.close());
    ws.on('message', (data: Buffer) => process.stdout.write(data));
    ws.on('close', () => finish(0));
    ws.on('error', () => finish(1));
  });
}
