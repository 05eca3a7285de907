import { imageNameProblem, workspaceProblem } from '@orch/protocol/rules';
import { isScalar, type Node } from 'yaml';
import {
  DEFAULTS,
  type Definition,
  GPU_FIELDS,
  type GpuRequest,
  IMAGE_WITH_FROM_BUILD,
  LIMITS,
  RESOURCE_FIELDS,
  TOP_FIELDS,
} from './definition.js';
import { type Diagnostic, START } from './diagnostics.js';
import { findGpuModel, GPU_MODELS } from './gpu.js';
import type { ParsedSource } from './parse.js';
import { describe, type Field, Reader } from './reader.js';
import { readExpose, readLines, readServices } from './sections.js';
import { didYouMean } from './suggest.js';
import { parseDuration, parseSize } from './units.js';

/**
 * Validates a parsed definition file against environment-definition.md and applies defaults.
 * Returns the definition, or every diagnostic found (never only the first).
 */
export function validateDefinition(
  parsed: ParsedSource,
  /** `fromBuild`: `image` is an error (compiled with `--from-build` and without `--image-is-base`). */
  options: { readonly fromBuild?: boolean } = {},
):
  | { readonly ok: true; readonly definition: Definition }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  const r = new Reader(parsed);
  r.diagnostics.push(...parsed.problems);
  const root = r.resolve(parsed.doc.contents as Node | null);
  if (root === null || (isScalar(root) && root.value === null)) {
    r.report(START, 'the definition file is empty: it needs at least "version: 1"');
    return { ok: false, diagnostics: r.diagnostics };
  }
  const top = r.map(root, 'the definition file', null);
  if (!top) return { ok: false, diagnostics: r.diagnostics };
  const f = r.fields(top, 'at the top level', TOP_FIELDS);

  const version = f.get('version');
  if (!version) {
    r.report(top, 'missing required field "version": add "version: 1"');
  } else if (!isVersionOne(version.value)) {
    r.report(
      version.value ?? version.key,
      `version ${describe(version.value)} is not supported: the only version is 1`,
    );
  }

  let image: Definition['image'];
  const imageField = f.get('image');
  if (imageField) {
    const name = r.string(imageField.value, 'image', imageField.key);
    // The rule of orchd's spec.image (`@orch/protocol/rules`): an agent boots only image names.
    const problem = name === undefined ? undefined : imageNameProblem(name);
    if (problem !== undefined) r.report(imageField.value, `image ${describe(imageField.value)} ${problem}`);
    else if (name !== undefined) image = { name, at: r.at(imageField.key) };
    if (options.fromBuild) r.report(imageField.key, IMAGE_WITH_FROM_BUILD);
  }

  const resources = readResources(r, f.get('resources'));

  let workspace: string = DEFAULTS.workspace;
  const ws = f.get('workspace');
  if (ws) {
    const value = r.string(ws.value, 'workspace', ws.key);
    if (value !== undefined) {
      const problem = workspaceProblem(value);
      if (problem === undefined) workspace = value;
      else r.report(ws.value, `workspace ${problem}, got ${describe(ws.value)}`);
    }
  }

  const setup = readLines(r, 'setup', f.get('setup'));
  const run = readLines(r, 'run', f.get('run'));
  const services = readServices(r, f.get('services'));
  const expose = readExpose(r, f.get('expose'));

  if (r.diagnostics.length > 0) return { ok: false, diagnostics: r.diagnostics };
  return {
    ok: true,
    definition: {
      ...(image ? { image } : {}),
      ...resources,
      workspace,
      setup: setup.lines,
      run: run.lines,
      lineAt: { setup: setup.at, run: run.at },
      services,
      expose,
    },
  };
}

/**
 * The spec's "only 1 is accepted (integer 1 or string "1")": the integer written `1` (not `0x1`,
 * `01`, `+1`, `1.0` or `1e0`, which YAML also reads as one), or the string "1".
 */
function isVersionOne(node: Node | null): boolean {
  if (!isScalar(node)) return false;
  if (node.value === '1') return true;
  return node.value === 1 && (node as { source?: string }).source === '1';
}

export function readResources(
  r: Reader,
  field: Field | undefined,
): Pick<Definition, 'cpus' | 'ramMb' | 'storageGb' | 'maxRuntimeSeconds' | 'gpu'> {
  const out = {
    cpus: DEFAULTS.cpus as number,
    ramMb: DEFAULTS.ramMb as number,
    storageGb: DEFAULTS.storageGb as number,
    maxRuntimeSeconds: DEFAULTS.maxRuntimeSeconds as number,
  };
  if (!field) return out;
  const map = r.map(field.value, 'resources', field.key);
  if (!map) return out;
  const f = r.fields(map, 'in resources', RESOURCE_FIELDS);

  const cpus = f.get('cpus');
  if (cpus)
    out.cpus =
      r.integer(cpus.value, 'resources.cpus', cpus.key, LIMITS.cpus.min, LIMITS.cpus.max) ?? out.cpus;

  const memory = f.get('memory');
  if (memory)
    out.ramMb =
      readSize(r, memory, 'resources.memory', 'MiB', LIMITS.ramMb.max, LIMITS.ramMb.min) ?? out.ramMb;

  const disk = f.get('disk');
  if (disk)
    out.storageGb =
      readSize(r, disk, 'resources.disk', 'GiB', LIMITS.storageGb.max, LIMITS.storageGb.min) ?? out.storageGb;

  const runtime = f.get('max_runtime');
  if (runtime) {
    const text = r.text(runtime.value);
    const seconds = text === undefined ? undefined : parseDuration(text);
    if (seconds === undefined) {
      r.report(
        runtime.value ?? runtime.key,
        `malformed duration ${describe(runtime.value)} for resources.max_runtime: write groups of <integer><unit> ` +
          'with units d, h, m, s in that order (90s, 30m, 1h30m, 2d) or a whole number of seconds, greater than zero',
      );
    } else if (seconds > LIMITS.maxRuntimeSeconds.max) {
      r.report(runtime.value, `resources.max_runtime ${text} is longer than the limit of 365d`);
    } else {
      out.maxRuntimeSeconds = seconds;
    }
  }

  const gpuField = f.get('gpu');
  const gpu = gpuField ? readGpu(r, gpuField) : undefined;
  return gpu ? { ...out, gpu } : out;
}

export function readSize(
  r: Reader,
  field: Field,
  where: string,
  unit: 'MiB' | 'GiB',
  max: number,
  min: number,
): number | undefined {
  const node = field.value;
  const text = isScalar(node) && typeof node.value === 'string' ? node.value : undefined;
  const parsed = text === undefined ? undefined : parseSize(text, unit);
  if (parsed && 'value' in parsed) {
    if (parsed.value < min) {
      r.report(node, `${where} ${text} is smaller than the minimum of ${min} ${unit}`);
      return undefined;
    }
    if (parsed.value <= max) return parsed.value;
    r.report(node, `${where} ${text} is larger than the limit of ${max} ${unit}`);
    return undefined;
  }
  const why =
    parsed?.problem.kind === 'not-whole'
      ? `it must come out as a whole number of ${unit}`
      : 'write <integer><unit> with no space, unit one of MiB, GiB, TiB, MB, GB, TB, greater than zero (for example 2GiB)';
  r.report(node ?? field.key, `malformed size ${describe(node)} for ${where}: ${why}`);
  return undefined;
}

export function readGpu(r: Reader, field: Field): GpuRequest | undefined {
  const map = r.map(field.value, 'resources.gpu', field.key);
  if (!map) return undefined;
  const f = r.fields(map, 'in resources.gpu', GPU_FIELDS);
  const modelField = f.get('model');
  if (!modelField) {
    r.report(map, `resources.gpu needs a model: one of ${GPU_MODELS.map((m) => m.name).join(', ')}`);
    return undefined;
  }
  const modelName = r.string(modelField.value, 'resources.gpu.model', modelField.key);
  if (modelName === undefined) return undefined;
  const model = findGpuModel(modelName);
  if (!model) {
    const names = GPU_MODELS.map((m) => m.name);
    const hint = didYouMean(modelName, names);
    r.report(
      modelField.value,
      `unknown GPU model "${modelName}"${hint ? ` (did you mean "${hint}"?)` : ''}; known models: ${names.join(', ')}`,
    );
  }

  let count = 1;
  const countField = f.get('count');
  if (countField) {
    const v = countField.value;
    if (
      isScalar(v) &&
      typeof v.value === 'number' &&
      Number.isInteger(v.value) &&
      v.value < LIMITS.gpuCount.min
    ) {
      r.report(v, `resources.gpu.count must be at least 1, got ${v.value}`);
      return undefined;
    }
    const n = r.integer(v, 'resources.gpu.count', countField.key, LIMITS.gpuCount.min, LIMITS.gpuCount.max);
    if (n === undefined) return undefined;
    count = n;
  }

  const migField = f.get('mig');
  if (!migField) return model ? { model: model.name, count } : undefined;
  const mig = r.string(migField.value, 'resources.gpu.mig', migField.key);
  if (mig === undefined || !model) return undefined;
  if (model.migProfiles.length === 0) {
    r.report(
      migField.key,
      `GPU model "${model.name}" is not MIG-capable: remove mig, or pick a100-40gb, a100-80gb, h100 or h200`,
    );
    return undefined;
  }
  if (!model.migProfiles.includes(mig)) {
    r.report(
      migField.value,
      `MIG profile "${mig}" is not offered by ${model.name}; it offers ${model.migProfiles.join(', ')}`,
    );
    return undefined;
  }
  if (count !== 1) {
    r.report(
      countField?.value ?? migField.key,
      `a MIG profile needs count 1, got count ${count}: one MIG slice per environment`,
    );
    return undefined;
  }
  return { model: model.name, count, mig };
}
