// One orch-agent for a benchmark: its own data dir (kernel and images linked from the test assets
// that `npm test` sets up), TCG, a fixed token, and a small JSON client for its API.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { testAgentAssets } from '../../scripts/test-agent-assets.mjs';

export const AGENT_BIN = resolve('packages/agent/bin/orch-agent.js');
export const ASSETS = testAgentAssets();
const TOKEN = 'bench-agent-token';

/**
 * Starts an agent on a free port. `dataDir` defaults to a new temp dir; `images` names the images to
 * link (all of them when absent); `env` adds settings. Resolves with `{ url, dataDir, api, stop }`.
 */
export async function startBenchAgent({ dataDir, images, logLevel = 'warn', env = {} } = {}) {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'orch-agent-bench-'));
  symlinkSync(join(ASSETS, 'kernel'), join(dir, 'kernel'));
  if (images) {
    mkdirSync(join(dir, 'images'), { recursive: true });
    for (const i of images) symlinkSync(join(ASSETS, 'images', i), join(dir, 'images', i));
  } else {
    symlinkSync(join(ASSETS, 'images'), join(dir, 'images'));
  }
  const agent = spawn(process.execPath, [AGENT_BIN], {
    env: {
      PATH: process.env.PATH,
      AGENT_PORT: '0',
      AGENT_ACCEL: 'tcg',
      AGENT_DATA_DIR: dir,
      MICROVM_AGENT_TOKEN: TOKEN,
      AGENT_LOG_LEVEL: logLevel,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((resolvePort, reject) => {
    agent.once('exit', (code) => reject(new Error(`orch-agent exited (${code}) before listening`)));
    createInterface({ input: agent.stdout }).on('line', (l) => {
      const m = /^orch-agent listening on http:\/\/.*:(\d+)$/.exec(l);
      if (m) resolvePort(Number(m[1]));
    });
  });
  const url = `http://127.0.0.1:${port}`;

  /** A JSON request with the agent's token; throws on an error status. */
  async function api(method, path, body) {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }

  /** Stops the agent and removes its data dir (unless the caller gave one). */
  async function stop() {
    agent.kill('SIGTERM');
    await new Promise((r) => (agent.exitCode !== null ? r() : agent.once('exit', r)));
    if (!dataDir) rmSync(dir, { recursive: true, force: true });
  }

  return { url, dataDir: dir, api, stop };
}
