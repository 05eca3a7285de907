// The console panel of the Environments page: the serial console in a terminal, over a WebSocket.
import type { Environment } from '@orch/protocol';
import { Terminal } from '@xterm/xterm';
import { h, mount } from '../dom.js';
import { section } from '../widgets.js';

/** Opens `env`'s serial console below the environments table; Close ends the connection. */
export function openConsole(main: HTMLElement, env: Environment): void {
  const box = h('div', { class: 'terminal' });
  const close = h('button', {}, 'Close');
  mount(
    section(main, 'panel'),
    h('div', { class: 'card' }, h('div', { class: 'row' }, h('h3', {}, `Console of ${env.id}`), close), box),
  );
  const term = new Terminal({ convertEol: false, fontSize: 13 });
  term.open(box);
  const ws = new WebSocket(
    `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/environments/${env.id}/attach`,
  );
  ws.binaryType = 'arraybuffer';
  ws.onmessage = (m) => term.write(new Uint8Array(m.data as ArrayBuffer));
  // The reason is orchd's own text when it closes the console (`session ended: logged out`).
  ws.onclose = (e) => term.write(`\r\n[console closed${e.reason ? `: ${e.reason}` : ''}]\r\n`);
  // Keys typed while the connection is still opening are sent once it is open, not dropped.
  const early: Uint8Array[] = [];
  ws.onopen = () => {
    for (const bytes of early.splice(0)) ws.send(bytes);
  };
  term.onData((d) => {
    const bytes = new TextEncoder().encode(d);
    if (ws.readyState === WebSocket.OPEN) ws.send(bytes);
    else if (ws.readyState === WebSocket.CONNECTING) early.push(bytes);
  });
  close.addEventListener('click', () => {
    ws.close();
    term.dispose();
    section(main, 'panel').replaceChildren();
  });
  term.focus();
}
