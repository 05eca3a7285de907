// Small pieces the dashboard's views share: progress buttons, state cells, stable sections.
import { h, toast } from './dom.js';

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
