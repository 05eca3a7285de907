/** Validation of the list sections of a definition: `setup`/`run` lines, `services`, `expose`. */
import {
  envNameProblem,
  MAX_EXPOSE,
  MAX_SERVICES,
  secretNameProblem,
  serviceImageProblem,
  serviceNameProblem,
  textProblem,
} from '@orch/protocol/rules';
import { isMap, isScalar, type Node } from 'yaml';
import {
  DNS_LABEL,
  ENV_FIELDS,
  type EnvValue,
  EXPOSE_FIELDS,
  type ExposeEntry,
  LIMITS,
  SERVICE_FIELDS,
  type ServiceDefinition,
} from './definition.js';
import type { Position } from './diagnostics.js';
import { describe, type Field, type Reader } from './reader.js';

/** The lines of `setup` or `run`, with where each was written. */
export function readLines(
  r: Reader,
  where: string,
  field: Field | undefined,
): { lines: string[]; at: Position[] } {
  const lines: string[] = [];
  const at: Position[] = [];
  if (!field) return { lines, at };
  if (isScalar(field.value) && field.value.value === null) return { lines, at };
  const seq = r.seq(field.value, `${where} (a list of shell lines)`, field.key);
  if (!seq) return { lines, at };
  seq.items.forEach((item, i) => {
    const node = r.resolve(item as Node | null);
    if (isScalar(node) && typeof node.value === 'string') {
      // The text rule of orchd's startup_script (`@orch/protocol/rules`): no NUL, no lone surrogate.
      const problem = textProblem(node.value);
      if (problem !== undefined) r.report(node, `${where}[${i}] ${problem}`);
      else {
        lines.push(node.value.replace(/\n+$/, ''));
        at.push(r.at(item as Node));
      }
    } else {
      r.report(node ?? seq, `${where}[${i}] must be a string, got ${describe(node)} (quote the line)`);
    }
  });
  return { lines, at };
}

export function readServices(r: Reader, field: Field | undefined): ServiceDefinition[] {
  if (!field) return [];
  if (isScalar(field.value) && field.value.value === null) return [];
  const map = r.map(field.value, 'services', field.key);
  if (!map) return [];
  const services: ServiceDefinition[] = [];
  let count = 0;
  for (const [name, svc] of r.fields(map, 'in services')) {
    // orchd and the agent refuse a manifest with more (`MAX_SERVICES`): said once, at the first extra.
    if (++count === MAX_SERVICES + 1)
      r.report(
        svc.key,
        `service "${name}" is one too many: an environment runs at most ${MAX_SERVICES} services`,
      );
    // The manifest's rule (`@orch/protocol/rules`), so that what compiles is what orchd accepts.
    const problem = serviceNameProblem(name);
    if (problem) {
      r.report(svc.key, `service name "${name}" ${problem}`);
      continue;
    }
    const where = `service "${name}"`;
    const body = r.map(svc.value, where, svc.key);
    if (!body) continue;
    const f = r.fields(body, `in ${where}`, SERVICE_FIELDS);
    const imageField = f.get('image');
    let image: string | undefined;
    if (imageField) {
      image = r.string(imageField.value, `${where} image`, imageField.key);
      // The manifest's rule (`@orch/protocol/rules`): the image must name an image a host can have.
      const problem = image === undefined ? undefined : serviceImageProblem(image);
      if (problem !== undefined) {
        r.report(imageField.value, `${where} image ${describe(imageField.value)} ${problem}`);
        image = undefined;
      }
    } else r.report(svc.key, `service "${name}" has no image: add "image: <name>" (for example postgres:16)`);

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
        // The manifest's rule (`@orch/protocol/rules`): the agent exports it into the container.
        const problem = envNameProblem(envName);
        if (problem) {
          r.report(entry.key, `env name "${envName}" of ${where} ${problem}`);
          continue;
        }
        const value = readEnvValue(r, entry, `env "${envName}" of ${where}`);
        if (value) env.push({ name: envName, value });
      }
    }
    if (image !== undefined) services.push({ name, at: r.at(svc.key), image, ports, env });
  }
  return services;
}

export function readEnvValue(r: Reader, entry: Field, where: string): EnvValue | undefined {
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
      const problem = secretNameProblem(name);
      if (problem) {
        r.report(secret.value, `secret name "${name}" ${problem}`);
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

export function readLiteral(r: Reader, node: Node | null, where: string, at: Node): EnvValue | undefined {
  const text = r.text(node);
  // The manifest's text rule (orchd and the agent refuse the same literal): no NUL, which no
  // process environment can hold, and no lone surrogate.
  const problem = text === undefined ? undefined : textProblem(text);
  if (problem !== undefined) {
    r.report(node, `${where} ${problem}`);
    return undefined;
  }
  if (text !== undefined) return { value: text };
  r.report(
    node ?? at,
    `${where} must be a string, number or boolean, or { secret: <name> }, got ${describe(node)}`,
  );
  return undefined;
}

export function readPort(r: Reader, node: Node | null, where: string, at: Node): number | undefined {
  if (isScalar(node) && typeof node.value === 'number' && Number.isInteger(node.value)) {
    if (node.value >= LIMITS.port.min && node.value <= LIMITS.port.max) return node.value;
    r.report(node, `${where} ${node.value} is out of range: ports are 1 to 65535`);
    return undefined;
  }
  r.report(node ?? at, `${where} must be an integer port from 1 to 65535, got ${describe(node)}`);
  return undefined;
}

export function readExpose(r: Reader, field: Field | undefined): ExposeEntry[] {
  if (!field) return [];
  if (isScalar(field.value) && field.value.value === null) return [];
  const seq = r.seq(field.value, 'expose', field.key);
  if (!seq) return [];
  const out: ExposeEntry[] = [];
  const names = new Map<string, Position>();
  seq.items.forEach((item, i) => {
    const where = `expose[${i}]`;
    // orchd refuses a request with more (`MAX_EXPOSE`): said once, at the first extra entry.
    if (i === MAX_EXPOSE)
      r.report(item as Node, `${where} is one too many: an environment exposes at most ${MAX_EXPOSE} ports`);
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
