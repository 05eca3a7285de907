/**
 * Environment definition files (`orch.yaml`): parse with positions, validate, compile into the
 * body of `POST /v1/environments`, and render it. Pure: no file system, no network, no env.
 *
 * @example
 * const result = compileSource(text, { taskId: 'demo' });
 * if (result.ok) process.stdout.write(renderJson(result.compiled.request));
 * else for (const d of result.diagnostics) console.error(formatDiagnostic('orch.yaml', d));
 */
import { type Compiled, type CompileOptions, compileDefinition, imageForbidden } from './compile.js';
import { type Diagnostic, sortDiagnostics } from './diagnostics.js';
import { parseSource } from './parse.js';
import { validateDefinition } from './validate.js';

/** Why a task id (or a `--from-build` snapshot id) cannot be used: the rule orchd applies to `task_id` too. */
export { checkIdentifier } from '@orch/protocol/rules';
export type { Compiled, CompiledRequest, CompileOptions, Manifest, ResourceSpec } from './compile.js';
export { base64Utf8, compileDefinition, shellQuote } from './compile.js';
export type { Definition, EnvValue, ExposeEntry, GpuRequest, ServiceDefinition } from './definition.js';
export { DEFAULTS, LIMITS } from './definition.js';
export type { Diagnostic, Position } from './diagnostics.js';
export { formatDiagnostic, sortDiagnostics } from './diagnostics.js';
export { GPU_MODELS, type GpuModel } from './gpu.js';
export { MAX_NESTING, MAX_SOURCE_LENGTH, type ParsedSource, parseSource } from './parse.js';
export { printable } from './printable.js';
export {
  FORMATS,
  type Format,
  ONLY_PARTS,
  type OnlyPart,
  renderJson,
  renderOnly,
  renderText,
  renderYaml,
} from './render.js';
export { parseDuration, parseSize } from './units.js';
export { validateDefinition } from './validate.js';

/** File names looked for, in order, when no path is given (environment-definition.md, "Discovery"). */
export const DEFINITION_FILE_NAMES = ['orch.yaml', 'orch.yml'] as const;

/** The outcome of compiling definition-file text: the compiled request, or every diagnostic in reading order. */
export type CompileResult =
  | { readonly ok: true; readonly compiled: Compiled }
  | { readonly ok: false; readonly diagnostics: readonly Diagnostic[] };

/**
 * Parses, validates and compiles definition-file text in one call. Never throws on any input:
 * problems come back as diagnostics.
 */
export function compileSource(text: string, options: CompileOptions): CompileResult {
  const parsed = parseSource(text);
  if (!parsed.ok) return { ok: false, diagnostics: sortDiagnostics(parsed.diagnostics) };
  const validated = validateDefinition(parsed.parsed, { fromBuild: imageForbidden(options) });
  if (!validated.ok) return { ok: false, diagnostics: sortDiagnostics(validated.diagnostics) };
  const compiled = compileDefinition(validated.definition, options);
  return compiled.ok ? compiled : { ok: false, diagnostics: compiled.diagnostics };
}
