// Small pieces the dashboard's views share: progress buttons, tables, empty states, stable sections.
import { api } from './api.js';
import { ago, type Child, h, toast } from './dom.js';

/** Runs a click handler with the button disabled and its label showing progress; errors become toasts. */
export function action(label: string, busy: string, fn: () => Promise<unknown>, cls = ''): HTMLButtonElement {
  const b = h('button', { class: cls }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    b.textContent = busy;
    try {
      await fn();
    } catch (err) {
      toast((err as Error).message);
    } finally {
      b.disabled = false;
      b.textContent = label;
    }
  });
  return b;
}

/** A table cell showing a state, coloured by the `state-*` class. */
export function stateCell(state: string): HTMLElement {
  return h('td', { class: `state-${state}` }, state);
}

/** Keeps a table's surrounding panels (exec boxes, terminals) while its rows refresh. */
export function section(main: HTMLElement, key: string): HTMLElement {
  let el = main.querySelector<HTMLElement>(`[data-section="${key}"]`);
  if (!el) {
    el = h('div', { 'data-section': key });
    main.append(el);
  }
  return el;
}

/**
 * A red button that sends `DELETE path` and then refreshes the page. With `question`, the request
 * is sent only if the user confirms it (the page refreshes either way).
 */
export function deleteButton(
  label: string,
  busy: string,
  path: string,
  refresh: () => Promise<unknown>,
  question?: string,
): HTMLButtonElement {
  return action(
    label,
    busy,
    async () => {
      if (question === undefined || confirm(question)) await api('DELETE', path);
      await refresh();
    },
    'danger',
  );
}

/**
 * A table with one header row and one body row per item.
 *
 * @example
 * table(['Key', 'Label'], keys, (k) => h('tr', {}, h('td', {}, k.id), h('td', {}, k.label)))
 */
export function table<T>(
  columns: readonly string[],
  items: readonly T[],
  row: (item: T) => HTMLTableRowElement,
): HTMLTableElement {
  return h(
    'table',
    {},
    h('thead', {}, h('tr', {}, ...columns.map((t) => h('th', {}, t)))),
    h('tbody', {}, ...items.map(row)),
  );
}

/** What a list page shows instead of an empty table: a title and what to do next. */
export function emptyCard(title: string, ...next: Child[]): HTMLElement {
  return h('div', { class: 'card' }, h('h2', {}, title), ...next);
}

/**
 * A progress line for a long action (create, restore, snapshot, pause): what is happening, a moving
 * bar and the time since `since`, ticking every second until the element leaves the page.
 */
export function progress(label: string, since: number): HTMLElement {
  const elapsed = h('span', { class: 'muted' });
  const el = h(
    'div',
    { class: 'progress', role: 'status', 'data-progress': '' },
    h('span', { class: 'spinner' }),
    `${label}… `,
    elapsed,
  );
  const tick = () => {
    elapsed.textContent = ago((Date.now() - since) / 1000);
  };
  tick();
  let seen = false;
  const timer = window.setInterval(() => {
    if (el.isConnected) seen = true;
    else if (seen) return window.clearInterval(timer);
    tick();
  }, 1000);
  return el;
}
