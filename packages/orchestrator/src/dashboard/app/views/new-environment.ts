// The New environment page: a definition compiled in the browser as you type, then created.
import { compileSource, formatDiagnostic, renderText } from '@orch/envdef';
import type { Environment } from '@orch/protocol';
import { api } from '../api.js';
import { h, mount } from '../dom.js';
import { action } from '../widgets.js';

/** Renders the definition editor, its compile preview and the create button into `main`. */
export function newEnvironmentView(main: HTMLElement): void {
  const text = h(
    'textarea',
    { name: 'definition', rows: 18, spellcheck: 'false' },
    'version: 1\nimage: debian-12\nresources:\n  cpus: 1\n  memory: 512MiB\nrun:\n  - echo ready\n',
  );
  const taskId = h('input', { name: 'task_id', value: 'dashboard' });
  const file = h('input', { type: 'file', accept: '.yaml,.yml,.json' });
  const preview = h('pre', { 'data-preview': '' });
  const secrets = h('div');
  let values: Record<string, HTMLInputElement> = {};
  const compile = () => {
    const r = compileSource(text.value, { taskId: taskId.value || 'dashboard' });
    if (!r.ok) {
      preview.textContent = r.diagnostics.map((d) => formatDiagnostic('orch.yaml', d)).join('\n');
      preview.classList.add('error');
      return undefined;
    }
    preview.classList.remove('error');
    preview.textContent = renderText(r.compiled);
    const names = r.compiled.request.required_secrets;
    if (names.join() !== Object.keys(values).join()) {
      values = Object.fromEntries(
        names.map((n) => [n, h('input', { type: 'password', name: `secret-${n}`, placeholder: n })]),
      );
      mount(
        secrets,
        ...(names.length
          ? [
              h('h3', {}, 'Secrets'),
              ...names.map((n) => h('div', { class: 'row' }, h('label', {}, n), values[n]!)),
            ]
          : []),
      );
    }
    return r.compiled;
  };
  text.addEventListener('input', compile);
  taskId.addEventListener('input', compile);
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (f) {
      text.value = await f.text();
      compile();
    }
  });
  const create = action(
    'Create environment',
    'Creating…',
    async () => {
      const compiled = compile();
      if (!compiled) throw new Error('fix the definition first (see the preview)');
      const missing = Object.entries(values)
        .filter(([, i]) => i.value === '')
        .map(([n]) => n);
      if (missing.length) throw new Error(`missing secrets: ${missing.join(', ')}`);
      const { required_secrets: _r, ...body } = compiled.request;
      const env = await api<Environment>('POST', '/v1/environments', {
        ...body,
        secrets: Object.fromEntries(Object.entries(values).map(([n, i]) => [n, i.value])),
      });
      // Its page shows the create's progress and startup log until it runs (or fails).
      location.hash = `#/environments/${env.id}`;
    },
    'primary',
  );
  mount(
    main,
    h(
      'div',
      { class: 'two' },
      h(
        'div',
        {},
        h('h3', {}, 'Definition (orch.yaml)'),
        h('div', { class: 'row' }, file, h('label', {}, 'task id'), taskId),
        text,
        secrets,
        h('div', { class: 'row' }, create),
      ),
      h('div', {}, h('h3', {}, 'Compile preview'), preview),
    ),
  );
  compile();
}
