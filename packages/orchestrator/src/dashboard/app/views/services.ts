// Manifest services on the Environments page: each service's state, restarts and last exit in the
// table, and a panel with the last 64 KiB of its log (GET /v1/environments/{id}/logs?service=).
import type { Environment } from '@orch/protocol';
import { h, mount } from '../dom.js';
import { action, section } from '../widgets.js';

/** How much of a service's log the panel shows (the tail). */
const LOG_TAIL_BYTES = 64 * 1024;

/** The Services cell of `env`'s row: one line per service, with a Logs button each. */
export function servicesCell(main: HTMLElement, env: Environment): HTMLElement {
  return h(
    'td',
    {},
    ...(env.services ?? []).map((s) =>
      h(
        'div',
        { 'data-service': s.name, title: s.image },
        `${s.name} `,
        h(
          'span',
          {
            class: `state-${s.state === 'running' ? 'running' : s.state === 'failed' ? 'error' : 'creating'}`,
          },
          s.state,
        ),
        s.restarts > 0 ? h('span', { class: 'muted' }, ` ↻${s.restarts}`) : null,
        s.exit_code !== undefined ? h('span', { class: 'muted' }, ` exit ${s.exit_code}`) : null,
        ' ',
        env.state === 'running'
          ? h('button', { onclick: () => void openServiceLog(main, env, s.name) }, 'Logs')
          : null,
      ),
    ),
  );
}

/** Opens a panel below the table with the tail of service `name`'s log, and a Refresh button. */
async function openServiceLog(main: HTMLElement, env: Environment, name: string): Promise<void> {
  const out = h('pre', { 'data-service-log': name }, 'Loading…');
  const load = async () => {
    const res = await fetch(
      `/v1/environments/${encodeURIComponent(env.id)}/logs?service=${encodeURIComponent(name)}&tail=${LOG_TAIL_BYTES}`,
      { credentials: 'same-origin' },
    );
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message;
      } catch {
        // not the envelope: show the text
      }
      throw new Error(message);
    }
    out.textContent = text || '(no output yet)';
  };
  mount(
    section(main, 'panel'),
    h(
      'div',
      { class: 'card' },
      h('h3', {}, `Service ${name} of ${env.id}`),
      h('div', { class: 'row' }, action('Refresh', 'Loading…', load)),
      out,
    ),
  );
  await load().catch((err: Error) => {
    out.textContent = err.message;
  });
}
