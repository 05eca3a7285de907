// The API keys page: create a key (its secret shown once), list and revoke keys.
import type { ApiKey, CreatedApiKey } from '@orch/protocol';
import { api } from '../api.js';
import { h, mount } from '../dom.js';
import { action, deleteButton, table } from '../widgets.js';

/** Renders the key form and the key list into `main`. */
export async function keysView(main: HTMLElement): Promise<void> {
  const label = h('input', { name: 'label', placeholder: 'what the key is for' });
  const created = h('div');
  const list = h('div');
  const refresh = async () => {
    const { api_keys } = await api<{ api_keys: ApiKey[] }>('GET', '/v1/api-keys');
    mount(
      list,
      api_keys.length === 0
        ? h('p', { class: 'muted' }, 'No API keys. Create one for a script or a CI job.')
        : table(['Key', 'Label', 'Hint', 'Created', 'Last used', ''], api_keys, (k) =>
            h(
              'tr',
              {},
              h('td', {}, k.id),
              h('td', {}, k.label),
              h('td', {}, k.hint),
              h('td', {}, k.created_at),
              h('td', {}, k.last_used_at ?? 'never'),
              h('td', {}, deleteButton('Revoke', 'Revoking…', `/v1/api-keys/${k.id}`, refresh)),
            ),
          ),
    );
  };
  const create = action(
    'Create key',
    'Creating…',
    async () => {
      const key = await api<CreatedApiKey>('POST', '/v1/api-keys', { label: label.value });
      const secret = h('code', { class: 'secret' }, key.secret);
      mount(
        created,
        h(
          'div',
          { class: 'card' },
          h('p', {}, 'Copy the secret now: it is shown only this once.'),
          h(
            'div',
            { class: 'row' },
            secret,
            h('button', { onclick: () => void navigator.clipboard?.writeText(key.secret) }, 'Copy'),
          ),
          h('button', { onclick: () => created.replaceChildren() }, 'Done'),
        ),
      );
      label.value = '';
      await refresh();
    },
    'primary',
  );
  mount(main, h('div', { class: 'row' }, label, create), created, list);
  await refresh();
}
