import { relative } from 'node:path';
import { shellQuote } from '@orch/envdef';
import { Build, type BuildStep } from '@orch/protocol';
import type { OrchClient } from '../api-client.js';
import { CliError } from '../errors.js';
import { BUILD_ID, idSegment } from '../ids.js';
import { client } from './client.js';
import { secretValues } from './environments.js';
import { compileFile, type OutputMode } from './preview.js';

const buildPath = (id: string) => `/v1/builds/${idSegment(BUILD_ID, id)}`;

export interface BuildFlags {
  readonly file?: string;
  readonly taskId?: string;
  /** `--no-cache` sets this to false. */
  readonly cache?: boolean;
  readonly secret?: string[];
  readonly secretsFile?: string;
  readonly detach?: boolean;
}

/**
 * `orch build`: compiles the definition as `up` does, posts its setup lines, spec, workspace and
 * secret values to `POST /v1/builds`, then prints one line per step as it finishes (CACHED or RUN,
 * the line, its duration, the layer key's first 12 digits) and the artifact with the command that
 * boots it ({@link runCommand}). `-o json` prints only the final build record.
 */
export async function build(
  positional: string | undefined,
  flags: BuildFlags,
  output: OutputMode,
  cwd: string,
): Promise<string> {
  const compiled = await compileFile(positional, { ...flags }, cwd);
  if (compiled.setup.length === 0) {
    throw new CliError(
      'orch: the definition has no setup lines: there is nothing to build (orch up runs it)',
    );
  }
  const secrets = await secretValues(compiled.request.required_secrets, flags);
  const api = await client();
  const started = await api.call(Build, 'POST', '/v1/builds', {
    task_id: compiled.request.task_id,
    spec: compiled.request.spec,
    workspace: compiled.manifest.machine.workspace,
    setup: compiled.setup,
    secrets,
    no_cache: flags.cache === false,
  });
  const print = (line: string) => {
    if (output !== 'json') process.stdout.write(line);
  };
  print(`build ${started.id}: ${started.steps.length} setup lines on ${started.host_id ?? '?'}\n`);
  if (flags.detach) return output === 'json' ? `${JSON.stringify(started, null, 2)}\n` : '';
  const final = await follow(api, started, (step) => print(stepLine(step, started.steps.length)));
  if (output === 'json') {
    if (final.state === 'failed') process.stdout.write(`${JSON.stringify(final, null, 2)}\n`);
    else return `${JSON.stringify(final, null, 2)}\n`;
  }
  if (final.state === 'failed') {
    const failed = final.steps.find((s) => s.state === 'failed');
    if (failed?.output)
      process.stderr.write(failed.output.endsWith('\n') ? failed.output : `${failed.output}\n`);
    throw new CliError(`orch: build ${final.id} failed: ${final.last_error ?? 'unknown error'}`);
  }
  const path = relative(cwd, positional ?? flags.file ?? '.') || '.';
  return [
    `artifact ${final.artifact_snapshot_id}`,
    `run it: ${runCommand(final.artifact_snapshot_id!, path, compiled.request.spec.image !== undefined)}`,
    '',
  ].join('\n');
}

/**
 * The `orch up` that boots a build's artifact with the definition just built. A definition that
 * sets `image` (the base the build ran on) gets `--image-is-base`: with a plain `--from-build` its
 * `image` is an error (compile rule 9); with it, the image is what orchd checks the artifact was
 * built on. `path` is quoted for a POSIX shell when it needs to be.
 */
function runCommand(artifact: string, path: string, setsImage: boolean): string {
  return `orch up --from-build ${artifact}${setsImage ? ' --image-is-base' : ''} ${shellQuote(path)}`;
}

/** Follows a build until it is no longer running, calling `onStep` once per finished step, in order. */
async function follow(api: OrchClient, first: Build, onStep: (step: BuildStep) => void): Promise<Build> {
  let b = first;
  let shown = 0;
  for (;;) {
    while (shown < b.steps.length && ['cached', 'built', 'failed'].includes(b.steps[shown]!.state)) {
      onStep(b.steps[shown]!);
      shown++;
    }
    if (b.state !== 'running') return b;
    await new Promise((r) => setTimeout(r, 500));
    b = await api.call(Build, 'GET', buildPath(b.id));
  }
}

/** `CACHED  [1/3]  0.0s  3f2a9c01d4e7  apt-get install -y curl` */
function stepLine(step: BuildStep, total: number): string {
  const tag = step.state === 'cached' ? 'CACHED' : step.state === 'built' ? 'RUN' : 'FAILED';
  const secs = `${((step.duration_ms ?? 0) / 1000).toFixed(1)}s`;
  const oneLine = step.line.replace(/\s*\n\s*/g, ' ');
  return `${tag.padEnd(7)} [${step.index + 1}/${total}] ${secs.padStart(7)}  ${step.layer_key.slice(0, 12)}  ${oneLine}\n`;
}
