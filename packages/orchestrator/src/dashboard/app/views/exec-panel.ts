// The exec panel of the Environments page: run one command in an environment, show its output.
import type { Environment, ExecResult } from '@orch/protocol';
import { api } from '../api.js';
import { h, mount } from '../dom.js';
import { action, section } from '../widgets.js';

/** Opens the exec panel for `env` below the environments table. */
export function openExec(main: HTMLElement, env: Environment): void {
  const cmd = h('input', { name: 'command', placeholder: 'echo hi', size: 50 });
  const out = h('pre', { 'data-output': '' }, 'Output appears here.');
  const run = action(
    'Run',
    'Running…',
    async () => {
      const argv = cmd.value.trim().split(/\s+/).filter(Boolean);
      if (argv.length === 0) throw new Error('type a command first');
      const r = await api<ExecResult>('POST', `/v1/environments/${env.id}?action=exec`, {
        argv: ['sh', '-c', cmd.value],
      });
      const decode = (b64: string) =>
        new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
      out.textContent = `${decode(r.stdout_base64)}${decode(r.stderr_base64)}\n[exit ${r.timed_out ? 'timed out' : r.exit_code}${r.truncated ? ', output cut' : ''}]`;
    },
    'primary',
  );
  cmd.addEventListener('keydown', (e) => e.key === 'Enter' && run.click());
  mount(
    section(main, 'panel'),
    h('div', { class: 'card' }, h('h3', {}, `Exec in ${env.id}`), h('div', { class: 'row' }, cmd, run), out),
  );
  cmd.focus();
}
