/** What `h` and `mount` take as children: nodes, or text (absent values are skipped). */
export type Child = Node | string | number | false | null | undefined;

/**
 * Creates an element. Text children become text nodes (never HTML), so nothing the API returns can
 * inject markup. `on*` attributes that are functions become event listeners.
 *
 * @example
 * h('button', { class: 'primary', onclick: () => save() }, 'Save')
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | ((e: Event) => void) | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return el;
}

/** Replaces an element's children. */
export function mount(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Shows an error message (the API's error.message) for a few seconds. */
export function toast(message: string): void {
  document.querySelector('.toast')?.remove();
  const el = h('div', { class: 'toast', role: 'alert' }, message);
  document.body.append(el);
  setTimeout(() => el.remove(), 8000);
}

/** "3m", "2h 5m": a short duration for ages and time left. */
export function ago(seconds: number): string {
  if (seconds < 60) return `${Math.max(0, Math.floor(seconds))}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

/** A capacity bar: used of total. */
export function bar(used: number, total: number, label: string): HTMLElement {
  const pct = total > 0 ? Math.min(100, Math.round((used / total) * 100)) : 0;
  return h(
    'div',
    {},
    h(
      'span',
      { class: 'bar', title: `${used} of ${total} ${label} used` },
      h('span', { style: `width:${pct}%` }),
    ),
    `${used}/${total} ${label}`,
  );
}
