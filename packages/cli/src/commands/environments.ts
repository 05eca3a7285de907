import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  clientDeadlineMs,
  Environment,
  EnvironmentList,
  ExecResult,
  execWaitMs,
  IDEMPOTENCY_KEY_HEADER,
  ORCHD_WAIT_SECONDS as W,
} from '@orch/protocol';
import { ApiCallError, type OrchClient } from '../api-client.js';
import { CliError, UsageError } from '../errors.js';
import { ENVIRONMENT_ID, idSegment } from '../ids.js';
import { table } from '../table.js';
import { client } from './client.js';
import { EnvChanges } from './env-changes.js';
import { compileFile, type OutputMode, type PreviewFlags } from './preview.js';

const envPath = (id: string) => `/v1/environments/${idSegment(ENVIRONMENT_ID, id)}`;

/**
 * Reads `NAME=VALUE` lines (blank lines and `#` comments ignored) from a secrets file. Names are
 * the user's, so they are kept in a Map (a name like `__proto__` is a name, not a prototype).
 */
async function readSecretsFile(path: string): Promise<Map<string, string>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(
      `orch: cannot read secrets file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const out = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) return;
    const eq = t.indexOf('=');
    if (eq <= 0) throw new CliError(`orch: ${path}:${i + 1}: expected NAME=VALUE`);
    out.set(t.slice(0, eq).trim(), t.slice(eq + 1));
  });
  return out;
}

function parseSecretFlags(list: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const item of list) {
    const eq = item.indexOf('=');
    if (eq <= 0)
      throw new UsageError(`--secret ${JSON.stringify(item.split('=')[0])} must look like NAME=VALUE`);
    out.set(item.slice(0, eq), item.slice(eq + 1));
  }
  return out;
}

/**
 * `orch up`: compiles the definition, checks that every required secret has a value (before
 * anything is sent), posts the request with only those secrets, then follows the environment until
 * it runs (unless `--detach`) and prints its id and exposed ports.
 */
export async function up(
  positional: string | undefined,
  flags: PreviewFlags & { secret?: string[]; secretsFile?: string; detach?: boolean },
  output: OutputMode,
  cwd: string,
): Promise<string> {
  // They shape the preview; without --dry-run up prints the environment it created (in the -o mode).
  if (flags.format !== undefined || flags.only !== undefined)
    throw new UsageError(
      '--format and --only apply to up only with --dry-run (use -o json for the created record)',
    );
  const compiled = await compileFile(positional, flags, cwd);
  const secrets = await secretValues(compiled.request.required_secrets, flags);
  const { required_secrets: _names, ...body } = compiled.request;
  const api = await client();
  // A seed may be fetched from another host before the VM is created.
  const waits = body.seed_snapshot_id ? W.transfer + W.agentCall : W.agentCall;
  const env = await createEnvironment(api, { ...body, secrets }, clientDeadlineMs(waits));
  return follow(api, env, flags.detach ?? false, output);
}

/** Attempts of one `orch up` create: the first and up to three retries, all with the same key. */
export const CREATE_ATTEMPTS = 4;

/**
 * Posts a create with an `Idempotency-Key` made for this invocation (a random UUID), and retries it
 * with the same key when no answer came (the connection failed or timed out: the first may have
 * created the environment, and the retry then answers that one) or the orchestrator said "not now"
 * with `retry_after_seconds` (its placement queue was full). Waits `retry_after_seconds`, else 1,
 * 2, 4 s, saying so on stderr. Any other answer is final. (A loop this small is not worth a retry
 * dependency in the CLI's start-up path.)
 */
export async function createEnvironment(
  api: OrchClient,
  body: unknown,
  timeoutMs: number,
  wait: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<Environment> {
  const key = randomUUID();
  for (let attempt = 1; ; attempt++) {
    try {
      return await api.call(Environment, 'POST', '/v1/environments', body, {
        timeoutMs,
        headers: { [IDEMPOTENCY_KEY_HEADER]: key },
      });
    } catch (err) {
      const delay = retryDelayMs(err, attempt);
      if (delay === undefined || attempt >= CREATE_ATTEMPTS) throw err;
      process.stderr.write(
        `${(err as Error).message}; retrying in ${delay / 1000} s with the same Idempotency-Key (${attempt + 1} of ${CREATE_ATTEMPTS})\n`,
      );
      await wait(delay);
    }
  }
}

/** How long to wait before retrying a create that failed with `err`, or undefined: do not retry. */
function retryDelayMs(err: unknown, attempt: number): number | undefined {
  if (!(err instanceof ApiCallError)) return undefined;
  const backoff = 1000 * 2 ** (attempt - 1);
  if (err.code === 'transport') return backoff;
  const after = err.details?.retry_after_seconds;
  if (err.code === 'unavailable' && typeof after === 'number' && after > 0) return Math.min(after, 60) * 1000;
  return undefined;
}

/**
 * The values of the `required` secrets from `--secrets-file` and `--secret` (which wins); a missing
 * one is an error before anything is sent, an extra one a warning. Shared by `up` and `build`.
 */
export async function secretValues(
  required: readonly string[],
  flags: { secret?: string[]; secretsFile?: string },
): Promise<Record<string, string>> {
  const given = new Map([
    ...(flags.secretsFile ? await readSecretsFile(flags.secretsFile) : []),
    ...parseSecretFlags(flags.secret ?? []),
  ]);
  const missing = required.filter((name) => !given.has(name));
  if (missing.length > 0) {
    throw new CliError(
      `orch: missing secrets: ${missing.join(', ')}: pass --secret NAME=VALUE or --secrets-file FILE (nothing was sent)`,
    );
  }
  for (const extra of [...given.keys()].filter((n) => !required.includes(n))) {
    process.stderr.write(`orch: ignoring secret ${extra}: the definition does not reference it\n`);
  }
  return Object.fromEntries(required.map((n) => [n, given.get(n)!]));
}

/**
 * Waits (with a progress line on stderr) until the environment runs or fails, then shows it. The
 * record is read again when the event stream says it changed (and every few seconds in case an
 * event was missed; every second when the stream is unavailable), not polled twice a second.
 */
export async function follow(
  api: OrchClient,
  created: Environment,
  detach: boolean,
  output: OutputMode,
): Promise<string> {
  let env = created;
  const started = Date.now();
  const tty = process.stderr.isTTY;
  if (!detach && env.state === 'creating') {
    const changes = await EnvChanges.open(api, env.id);
    try {
      // Read once the stream is open: a change made before it is not missed.
      env = await api.call(Environment, 'GET', envPath(env.id));
      for (let quiet = 0; env.state === 'creating'; ) {
        const secs = ((Date.now() - started) / 1000).toFixed(0);
        if (tty) process.stderr.write(`\r${env.id}: creating on ${env.host_id} (${secs}s)`);
        const woke = await changes.next(1000);
        quiet = woke === 'quiet' ? quiet + 1 : 0;
        if (woke === 'changed' || !changes.live || quiet % 5 === 0)
          env = await api.call(Environment, 'GET', envPath(env.id));
      }
    } finally {
      changes.close();
    }
  }
  if (tty && !detach) process.stderr.write('\n');
  if (env.state === 'error')
    throw new CliError(`orch: environment ${env.id} failed: ${env.last_error ?? 'unknown error'}`);
  return showEnvironment(env, output);
}

export function showEnvironment(env: Environment, output: OutputMode): string {
  if (output === 'json') return `${JSON.stringify(env, null, 2)}\n`;
  const lines = [`${env.id}  ${env.state}  on ${env.host_id}  task ${env.task_id}`];
  if (env.last_error) lines.push(`  last error: ${env.last_error}`);
  if (env.state === 'paused') lines.push(`  paused: resume with \`orch env resume ${env.id}\``);
  // Expiry and ports mean something only while the VM is up.
  if (env.state === 'running' || env.state === 'creating') {
    if (env.expires_at) lines.push(`  stops at ${env.expires_at} (max runtime)`);
    for (const p of env.ports) lines.push(`  ${p.as.padEnd(12)} ${p.url}  -> guest port ${p.port}`);
  }
  const services = env.services;
  if (services.length > 0) {
    lines.push('  services:');
    for (const s of services) {
      const exit = s.exit_code !== undefined ? `  last exit ${s.exit_code}` : '';
      const ports = s.ports.length > 0 ? `  ports ${s.ports.join(',')}` : '';
      lines.push(
        `    ${s.name.padEnd(12)} ${s.state.padEnd(10)} ${s.image}  restarts ${s.restarts}${exit}${ports}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

export async function listEnvironments(output: OutputMode): Promise<string> {
  const { environments } = await (await client()).call(EnvironmentList, 'GET', '/v1/environments');
  if (output === 'json') return `${JSON.stringify({ environments }, null, 2)}\n`;
  if (environments.length === 0) return 'no environments: create one with `orch up`\n';
  return table(
    ['ID', 'STATE', 'HOST', 'TASK', 'CPUS', 'RAM MB', 'PORTS', 'CREATED'],
    environments.map((e) => [
      e.id,
      e.state,
      e.host_id,
      e.task_id,
      String(e.spec.cpus),
      String(e.spec.ram_mb),
      e.ports.map((p) => `${p.as}:${p.host_port}`).join(',') || '-',
      e.created_at,
    ]),
  );
}

export async function getEnvironment(id: string, output: OutputMode): Promise<string> {
  const path = envPath(id);
  return showEnvironment(await (await client()).call(Environment, 'GET', path), output);
}

/** `orch env pause <env>`: `?action=pause`; prints the environment (state `paused`). */
export async function pauseEnvironment(id: string, output: OutputMode): Promise<string> {
  const path = `${envPath(id)}?action=pause`;
  const deadline = { timeoutMs: clientDeadlineMs(W.pauseResume) };
  return showEnvironment(await (await client()).call(Environment, 'POST', path, undefined, deadline), output);
}

/** `orch env resume <env>`: `?action=resume`; prints the environment (state `running`, its ports). */
export async function resumeEnvironment(id: string, output: OutputMode): Promise<string> {
  const path = `${envPath(id)}?action=resume`;
  const deadline = { timeoutMs: clientDeadlineMs(W.pauseResume) };
  return showEnvironment(await (await client()).call(Environment, 'POST', path, undefined, deadline), output);
}

export async function removeEnvironment(id: string, output: OutputMode): Promise<string> {
  const path = envPath(id);
  const deadline = { timeoutMs: clientDeadlineMs(W.agentCall) };
  return showEnvironment(
    await (await client()).call(Environment, 'DELETE', path, undefined, deadline),
    output,
  );
}

/**
 * `orch exec <env> -- <cmd...>`: runs the command in the guest, writes its output to this
 * process's stdout and stderr, and returns the remote exit status (124 when it timed out).
 */
export async function exec(
  id: string,
  argv: readonly string[],
  opts: { timeout?: string; cwd?: string; env?: string[] },
): Promise<number> {
  const path = `${envPath(id)}?action=exec`;
  if (argv.length === 0)
    throw new UsageError('give the command after --, for example: orch exec env_1 -- uname -a');
  const timeout = opts.timeout === undefined ? 60 : Number(opts.timeout);
  if (!Number.isInteger(timeout) || timeout < 1)
    throw new UsageError('--timeout must be a whole number of seconds');
  const env: Record<string, string> = {};
  for (const e of opts.env ?? []) {
    const eq = e.indexOf('=');
    if (eq <= 0) throw new UsageError(`--env ${JSON.stringify(e)} must look like NAME=VALUE`);
    env[e.slice(0, eq)] = e.slice(eq + 1);
  }
  // As long as orchd waits for the agent (the command's own timeout and a margin), plus a margin.
  const result = await (await client()).call(
    ExecResult,
    'POST',
    path,
    { argv, env, timeout_seconds: timeout, ...(opts.cwd ? { cwd: opts.cwd } : {}) },
    { timeoutMs: clientDeadlineMs(execWaitMs(timeout) / 1000) },
  );
  process.stdout.write(Buffer.from(result.stdout_base64, 'base64'));
  process.stderr.write(Buffer.from(result.stderr_base64, 'base64'));
  if (result.truncated) process.stderr.write('orch: the output was longer than the limit and was cut\n');
  if (result.timed_out) {
    process.stderr.write(`orch: the command did not finish within ${timeout}s and was killed\n`);
    return 124;
  }
  return result.exit_code ?? 1;
}
