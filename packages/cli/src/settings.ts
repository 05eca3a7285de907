import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Every environment variable the CLI reads, declared once: where the contexts file lives
 * (`$XDG_CONFIG_HOME/orch/config.json`, else `~/.config/orch/config.json`).
 */
export function contextsFile(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const xdg = env.XDG_CONFIG_HOME;
  const base = xdg?.startsWith('/') ? xdg : join(env.HOME ?? homedir(), '.config');
  return join(base, 'orch', 'config.json');
}
