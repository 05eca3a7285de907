import {
  type Compiled,
  checkIdentifier,
  compileSource,
  type Format,
  formatDiagnostic,
  type OnlyPart,
  renderJson,
  renderOnly,
  renderText,
  renderYaml,
} from '@orch/envdef';
import { AGENT_ID, ID_RULES } from '@orch/protocol/rules';
import { loadDefinitionFile, taskIdFromPath } from '../definition-file.js';
import { CliError, DiagnosticsError, UsageError } from '../errors.js';

/** Flags shared by `compile` and `up --dry-run` (they print the same output through this code). */
export interface PreviewFlags {
  readonly file?: string;
  readonly taskId?: string;
  readonly format?: Format;
  readonly only?: OnlyPart;
  readonly fromBuild?: string;
  /** With `fromBuild`: the definition's `image` is the image the artifact was built on (orchd checks). */
  readonly imageIsBase?: boolean;
}

/** The global `-o/--output` setting. */
export type OutputMode = 'table' | 'json';

/**
 * Compiles the definition file as `compile`, `up` and `up --dry-run` all do (path resolution, task
 * id, `--from-build`, `--image-is-base`); diagnostics become a DiagnosticsError. Makes no network
 * request.
 */
export async function compileFile(
  positional: string | undefined,
  flags: PreviewFlags,
  cwd: string,
): Promise<Compiled> {
  if (flags.taskId !== undefined) {
    const problem = checkIdentifier('--task-id', flags.taskId);
    if (problem) throw new UsageError(problem);
  }
  if (flags.imageIsBase && flags.fromBuild === undefined) {
    throw new UsageError(
      "--image-is-base needs --from-build: it says the definition's image is the one the artifact was built on",
    );
  }
  if (flags.fromBuild !== undefined) {
    // A snapshot id is an agent id (it becomes part of a path on the host): refused here, before
    // any file is read, rather than by orchd after the compile.
    const problem =
      checkIdentifier('--from-build snapshot id', flags.fromBuild) ??
      (AGENT_ID.test(flags.fromBuild) ? undefined : `--from-build snapshot id must be ${ID_RULES.agentId}`);
    if (problem) throw new UsageError(problem);
  }
  const file = await loadDefinitionFile({ file: flags.file, positional, cwd });
  const taskId = flags.taskId ?? taskIdFromPath(file.path);
  const problem = flags.taskId === undefined ? checkIdentifier('task id', taskId) : undefined;
  if (problem) {
    throw new CliError(
      `orch: cannot take the task id from the directory of ${file.display} (${problem}); pass --task-id`,
    );
  }
  const result = compileSource(file.text, {
    taskId,
    ...(flags.fromBuild !== undefined ? { fromBuild: flags.fromBuild } : {}),
    ...(flags.imageIsBase ? { imageIsBase: true } : {}),
  });
  if (!result.ok)
    throw new DiagnosticsError(result.diagnostics.map((d) => formatDiagnostic(file.display, d)));
  return result.compiled;
}

/**
 * Compiles the definition file and returns what to print: the human view, the JSON or YAML body,
 * or one `--only` part. Makes no network request and reads no configuration.
 */
export async function preview(
  positional: string | undefined,
  flags: PreviewFlags,
  output: OutputMode,
  cwd: string,
): Promise<string> {
  if (flags.only !== undefined && flags.format !== undefined) {
    throw new UsageError('--only and --format cannot be used together: --only prints one part undecorated');
  }
  const compiled = await compileFile(positional, flags, cwd);
  if (flags.only !== undefined) return renderOnly(compiled, flags.only);
  const format: Format = flags.format ?? (output === 'json' ? 'json' : 'text');
  switch (format) {
    case 'json':
      return renderJson(compiled.request);
    case 'yaml':
      return renderYaml(compiled.request);
    case 'text':
      return renderText(compiled);
  }
}
