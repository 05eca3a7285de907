// The login page (/login): the master token, exchanged for a session cookie.
import { api } from './api.js';
import { h, mount } from './dom.js';

/** Shows the login form in `root`; a successful login goes to the dashboard. */
export function showLogin(root: HTMLElement): void {
  const token = h('input', {
    type: 'password',
    name: 'token',
    placeholder: 'master token',
    autocomplete: 'current-password',
  });
  const error = h('p', { class: 'error', role: 'alert' });
  const form = h(
    'form',
    {
      class: 'card login',
      onsubmit: async (e) => {
        e.preventDefault();
        error.textContent = '';
        try {
          await api('POST', '/login', { token: token.value });
          location.assign('/');
        } catch (err) {
          error.textContent = (err as Error).message;
        }
      },
    },
    h('h2', {}, 'Log in to orchd'),
    h('p', { class: 'muted' }, 'Paste the master token (ORCH_AUTH_TOKEN).'),
    token,
    h('button', { class: 'primary', type: 'submit' }, 'Log in'),
    error,
  );
  mount(root, form);
  token.focus();
}
