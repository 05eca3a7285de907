import { isAlias, isMap, isScalar, isSeq, type Node, type Pair, type YAMLMap, type YAMLSeq } from 'yaml';
import { type Diagnostic, type Position, START } from './diagnostics.js';
import { findGpuModel, GPU_MODELS } from './gpu.js';
import type { ParsedSource } from './parse.js';
import { didYouMean } from './suggest.js';
import { parseDuration, parseSize } from './units.js';

/** A GPU request as the definition states it (validated against the catalog). */
export interface GpuRequest {
  readonly model: string;
  readonly count: number;
  readonly mig?: string;
}

/** A service environment variable: a literal (always a string) or a reference to a named secret. */
export type EnvValue = { readonly value: string } | { readonly secret: string };

/** A service of the manifest, with env entries in file order. */
export interface ServiceDefinition {
  readonly name: string;
  readonly image: string;
  readonly ports: readonly number[];
  readonly env: readonly { readonly name: string; readonly value: EnvValue }[];
}

/** One `expose` entry. */
export interface ExposeEntry {
  readonly port: number;
  readonly as: string;
}

/** A definition file that passed validation, with every default applied. */
export interface Definition {
  /** The rootfs image, with where it was written (so `--from-build` can point at it). */
  readonly image?: { readonly name: string; readonly at: Position };
  readonly cpus: number;
  readonly ramMb: number;
  readonly storageGb: number;
  readonly maxRuntimeSeconds: number;
  readonly gpu?: GpuRequest;
  readonly workspace: string;
  readonly setup: readonly string[];
  readonly run: readonly string[];
  readonly services: readonly ServiceDefinition[];
  readonly expose: readonly ExposeEntry[];
}

/**
 * Numeric bounds the spec leaves open ("numeric bounds of spec fields: not shown"); see the package
 * README. They keep every compiled number a small, exact integer.
 */
export const LIMITS = {
  cpus: { min: 1, max: 1024 },
  ramMb: { max: 16 * 1024 * 1024 }, // 16 TiB
  storageGb: { max: 1024 * 1024 }, // 1 PiB
  maxRuntimeSeconds: { max: 365 * 86_400 }, // 365 days
  gpuCount: { min: 1, max: 64 },
  port: { min: 1, max: 65_535 },
} as const;

export const DEFAULTS = {
  cpus: 2,
  memory: '2GiB',
  ramMb: 2048,
  disk: '10GiB',
  storageGb: 10,
  maxRuntime: '1h',
  maxRuntimeSeconds: 3600,
  workspace: '/workspace',
} as const;

const TOP_FIELDS = ['version', 'image', 'resources', 'workspace', 'setup', 'run', 'services', 'expose'];
const RESOURCE_FIELDS = ['cpus', 'memory', 'disk', 'max_runtime', 'gpu'];
const GPU_FIELDS = ['model', 'count', 'mig'];
const SERVICE_FIELDS = ['image', 'ports', 'env'];
const ENV_FIELDS = ['value', 'secret'];
const EXPOSE_FIELDS = ['port', 'as'];

const DNS_LABEL = /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/;
const SERVICE_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;
const MAX_ALIAS_RESOLUTIONS = 1000;

/** The diagnostic for `image` in a definition compiled with `--from-build` (compile rule 9). */
export const IMAGE_WITH_FROM_BUILD =
  'image cannot be used with --from-build: a build artifact and an image both name the rootfs to boot; remove image';

interface Field {
  readonly key: Node;
  readonly value: Node | null;
}

/** Walks the YAML tree, reporting every problem it finds and never stopping at the first. */
class Reader {
  readonly diagnostics: Diagnostic[] = [];
  private aliasBudget = MAX_ALIAS_RESOLUTIONS;

  constructor(private readonly source: ParsedSource) {}

  at(node: Node | null | undefined, fallback: Position = START): Position {
    const offset = node?.range?.[0];
    return offset === undefined ? fallback : this.source.positionOf(offset);
  }

  report(where: Node | Position | null | undefined, message: string): void {
    const pos = where && 'line' in where ? where : this.at(where as Node | null | undefined);
    this.diagnostics.push({ line: pos.line, col: pos.col, message });
  }

  /** Follows an alias to the node it names (bounded, so a "billion laughs" file stays cheap). */
  resolve(node: Node | null | undefined): Node | null {
    let current: unknown = node ?? null;
    while (isAlias(current)) {
      if (--this.aliasBudget < 0) {
        if (this.aliasBudget === -1) this.report(current, `more than ${MAX_ALIAS_RESOLUTIONS} alias uses`);
        return null;
      }
      current = current.resolve(this.source.doc) ?? null;
    }
    return current as Node | null;
  }

  /**
   * The mapping's fields by name, reporting non-string, duplicate and (if `known` is given) unknown
   * keys. `place` completes "unknown field "x" ...", e.g. "at the top level" or "in resources".
   */
  fields(map: YAMLMap, place: string, known?: readonly string[]): Map<string, Field> {
    const out = new Map<string, Field>();
    for (const pair of map.items as Pair<Node, Node | null>[]) {
      const key = this.resolve(pair.key);
      if (!isScalar(key) || key.value === null || typeof key.value === 'object') {
        this.report(pair.key ?? pair.value ?? map, `a key ${place} is not a name`);
        continue;
      }
      const name = String(key.value);
      const first = out.get(name);
      if (first) {
        const p = this.at(first.key);
        this.report(key, `duplicate key "${name}" ${place} (first defined at ${p.line}:${p.col})`);
        continue;
      }
      if (known && !known.includes(name)) {
        const hint = didYouMean(name, known);
        const suffix = hint ? ` (did you mean "${hint}"?)` : `; known fields: ${known.join(', ')}`;
        this.report(key, `unknown field "${name}" ${place}${suffix}`);
        continue;
      }
      out.set(name, { key, value: this.resolve(pair.value) });
    }
    return out;
  }

  map(node: Node | null, where: string, at: Node | null): YAMLMap | undefined {
    if (isMap(node)) return node;
    this.report(node ?? at, `${where} must be a mapping, got ${describe(node)}`);
    return undefined;
  }

  seq(node: Node | null, where: string, at: Node | null): YAMLSeq | undefined {
    if (isSeq(node)) return node;
    this.report(node ?? at, `${where} must be a list, got ${describe(node)}`);
    return undefined;
  }

  string(node: Node | null, where: string, at: Node | null): string | undefined {
    if (isScalar(node) && typeof node.value === 'string') {
      if (node.value === '') this.report(node, `${where} must not be empty`);
      else if (CONTROL.test(node.value)) this.report(node, `${where} must not contain control characters`);
      else return node.value;
      return undefined;
    }
    this.report(node ?? at, `${where} must be a string, got ${describe(node)}`);
    return undefined;
  }

  integer(node: Node | null, where: string, at: Node | null, min: number, max: number): number | undefined {
    if (isScalar(node) && typeof node.value === 'number' && Number.isInteger(node.value)) {
      if (node.value >= min && node.value <= max) return node.value;
      this.report(node, `${where} ${node.value} is out of range: it must be from ${min} to ${max}`);
      return undefined;
    }
    this.report(node ?? at, `${where} must be an integer from ${min} to ${max}, got ${describe(node)}`);
    return undefined;
  }

  /** A scalar's text: strings as they are, numbers and booleans as written in the file. */
  text(node: Node | null): string | undefined {
    if (!isScalar(node)) return undefined;
    if (typeof node.value === 'string') return node.value;
    if (typeof node.value === 'number' || typeof node.value === 'boolean') {
      return (node as { source?: string }).source ?? String(node.value);
    }
    return undefined;
  }
}

/** A short description of what the user wrote, for "got ..." in messages. */
function describe(node: Node | null): string {
  if (node === null) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    const v = node.value;
    if (v === null) return 'nothing';
    if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
    if (typeof v === 'number' || typeof v === 'boolean')
      return (node as { source?: string }).source ?? String(v);
  }
  return 'a value of another type';
}

/**
 * Validates a parsed definition file against environment-definition.md and applies defaults.
 * Returns the definition, or every diagnostic found (never only the first).
 */
export function validateDefinition(
  parsed: ParsedSource,
  options: { readonly fromBuild?: boolean } = {},
):
  | { readonly ok: true; readonly definition: Definition }
  | { readonly ok: false; readonly diagnostics: Diagnostic[] } {
  const r = new Reader(parsed);
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
  } else if (!isScalar(version.value) || (version.value.value !== 1 && version.value.value !== '1')) {
    r.report(
      version.value ?? version.key,
      `version ${describe(version.value)} is not supported: the only version is 1`,
    );
  }

  let image: Definition['image'];
  const imageField = f.get('image');
  if (imageField) {
    const name = r.string(imageField.value, 'image', imageField.key);
    if (name !== undefined) image = { name, at: r.at(imageField.key) };
    if (options.fromBuild) r.report(imageField.key, IMAGE_WITH_FROM_BUILD);
  }

  const resources = readResources(r, f.get('resources'));

  let workspace: string = DEFAULTS.workspace;
  const ws = f.get('workspace');
  if (ws) {
    const value = r.string(ws.value, 'workspace', ws.key);
    if (value !== undefined) {
      if (value.startsWith('/')) workspace = value;
      else
        r.report(
          ws.value,
          `workspace must be an absolute guest path (starting with "/"), got ${JSON.stringify(value)}`,
        );
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
      setup,
      run,
      services,
      expose,
    },
  };
}

function readResources(
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
  if (memory) out.ramMb = readSize(r, memory, 'resources.memory', 'MiB', LIMITS.ramMb.max) ?? out.ramMb;

  const disk = f.get('disk');
  if (disk) out.storageGb = readSize(r, disk, 'resources.disk', 'GiB', LIMITS.storageGb.max) ?? out.storageGb;

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

function readSize(
  r: Reader,
  field: Field,
  where: string,
  unit: 'MiB' | 'GiB',
  max: number,
): number | undefined {
  const node = field.value;
  const text = isScalar(node) && typeof node.value === 'string' ? node.value : undefined;
  const parsed = text === undefined ? undefined : parseSize(text, unit);
  if (parsed && 'value' in parsed) {
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

function readGpu(r: Reader, field: Field): GpuRequest | undefined {
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

function readLines(r: Reader, where: string, field: Field | undefined): string[] {
  if (!field) return [];
  if (isScalar(field.value) && field.value.value === null) return [];
  const seq = r.seq(field.value, `${where} (a list of shell lines)`, field.key);
  if (!seq) return [];
  const lines: string[] = [];
  seq.items.forEach((item, i) => {
    const node = r.resolve(item as Node | null);
    if (isScalar(node) && typeof node.value === 'string') {
      if (node.value.includes('\u0000')) r.report(node, `${where}[${i}] must not contain a NUL character`);
      else lines.push(node.value.replace(/\n+$/, ''));
    } else {
      r.report(node ?? seq, `${where}[${i}] must be a string, got ${describe(node)} (quote the line)`);
    }
  });
  return lines;
}

function readServices(r: Reader, field: Field | undefined): ServiceDefinition[] {
  if (!field) return [];
  if (isScalar(field.value) && field.value.value === null) return [];
  const map = r.map(field.value, 'services', field.key);
  if (!map) return [];
  const services: ServiceDefinition[] = [];
  for (const [name, svc] of r.fields(map, 'in services')) {
    if (!SERVICE_NAME.test(name)) {
      r.report(
        svc.key,
        `service name "${name}" must start with a letter and hold only letters, digits, "_", "." and "-" (at most 63)`,
      );
      continue;
    }
    const where = `service "${name}"`;
    const body = r.map(svc.value, where, svc.key);
    if (!body) continue;
    const f = r.fields(body, `in ${where}`, SERVICE_FIELDS);
    const imageField = f.get('image');
    let image: string | undefined;
    if (imageField) image = r.string(imageField.value, `${where} image`, imageField.key);
    else r.report(svc.key, `service "${name}" has no image: add "image: <name>" (for example postgres:16)`);

    const ports: number[] = [];
    const portsField = f.get('ports');
    const seq = portsField ? r.seq(portsField.value, `${where} ports`, portsField.key) : undefined;
    seq?.items.forEach((item, i) => {
      const p = readPort(r, r.resolve(item as Node | null), `${where} ports[${i}]`, seq);
      if (p !== undefined) ports.push(p);
    });

    const env: { name: string; value: EnvValue }[] = [];
    const envField = f.get('env');
    const envMap = envField ? r.map(envField.value, `${where} env`, envField.key) : undefined;
    if (envMap) {
      for (const [envName, entry] of r.fields(envMap, `in the env of ${where}`)) {
        if (!ENV_NAME.test(envName)) {
          r.report(entry.key, `env name "${envName}" of ${where} must match [A-Za-z_][A-Za-z0-9_]*`);
          continue;
        }
        const value = readEnvValue(r, entry, `env "${envName}" of ${where}`);
        if (value) env.push({ name: envName, value });
      }
    }
    if (image !== undefined) services.push({ name, image, ports, env });
  }
  return services;
}

function readEnvValue(r: Reader, entry: Field, where: string): EnvValue | undefined {
  const node = entry.value;
  if (isMap(node)) {
    const f = r.fields(node, `in ${where}`, ENV_FIELDS);
    const value = f.get('value');
    const secret = f.get('secret');
    if (value && secret) {
      r.report(entry.key, `${where} sets both value and secret: keep one`);
      return undefined;
    }
    if (secret) {
      const name = r.string(secret.value, `${where} secret`, secret.key);
      if (name === undefined) return undefined;
      if (!SECRET_NAME.test(name)) {
        r.report(secret.value, `secret name "${name}" must match [A-Za-z_][A-Za-z0-9_.-]* (at most 128)`);
        return undefined;
      }
      return { secret: name };
    }
    if (value) return readLiteral(r, value.value, where, value.key);
    r.report(node, `${where} needs "value" or "secret"`);
    return undefined;
  }
  return readLiteral(r, node, where, entry.key);
}

function readLiteral(r: Reader, node: Node | null, where: string, at: Node): EnvValue | undefined {
  const text = r.text(node);
  if (text !== undefined) return { value: text };
  r.report(
    node ?? at,
    `${where} must be a string, number or boolean, or { secret: <name> }, got ${describe(node)}`,
  );
  return undefined;
}

function readPort(r: Reader, node: Node | null, where: string, at: Node): number | undefined {
  if (isScalar(node) && typeof node.value === 'number' && Number.isInteger(node.value)) {
    if (node.value >= LIMITS.port.min && node.value <= LIMITS.port.max) return node.value;
    r.report(node, `${where} ${node.value} is out of range: ports are 1 to 65535`);
    return undefined;
  }
  r.report(node ?? at, `${where} must be an integer port from 1 to 65535, got ${describe(node)}`);
  return undefined;
}

function readExpose(r: Reader, field: Field | undefined): ExposeEntry[] {
  if (!field) return [];
  if (isScalar(field.value) && field.value.value === null) return [];
  const seq = r.seq(field.value, 'expose', field.key);
  if (!seq) return [];
  const out: ExposeEntry[] = [];
  const names = new Map<string, Position>();
  seq.items.forEach((item, i) => {
    const where = `expose[${i}]`;
    const map = r.map(r.resolve(item as Node | null), where, seq);
    if (!map) return;
    const f = r.fields(map, `in ${where}`, EXPOSE_FIELDS);
    const portField = f.get('port');
    const asField = f.get('as');
    if (!portField) r.report(map, `${where} needs a port`);
    if (!asField) r.report(map, `${where} needs "as", a name for the port (for example web)`);
    const port = portField ? readPort(r, portField.value, `${where}.port`, portField.key) : undefined;
    let as: string | undefined;
    if (asField) {
      as = r.string(asField.value, `${where}.as`, asField.key);
      if (as !== undefined && !DNS_LABEL.test(as)) {
        r.report(
          asField.value,
          `${where}.as "${as}" must be a DNS label: lowercase letters, digits and "-", starting with a letter, at most 63`,
        );
        as = undefined;
      } else if (as !== undefined) {
        const first = names.get(as);
        if (first) {
          r.report(
            asField.value,
            `${where}.as "${as}" is already used at ${first.line}:${first.col}; names must be unique`,
          );
          as = undefined;
        } else {
          names.set(as, r.at(asField.value));
        }
      }
    }
    if (port !== undefined && as !== undefined) out.push({ port, as });
  });
  return out;
}
