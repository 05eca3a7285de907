import { stringify } from 'yaml';
import type { Compiled, CompiledRequest } from './compile.js';
import { printable } from './printable.js';

/** The parts `--only` can print. */
export const ONLY_PARTS = ['spec', 'startup-script', 'manifest', 'expose', 'secrets'] as const;
export type OnlyPart = (typeof ONLY_PARTS)[number];

/** The full output formats. `text` is the human view; `json` and `yaml` are the request body. */
export const FORMATS = ['text', 'json', 'yaml'] as const;
export type Format = (typeof FORMATS)[number];

/** The request body as JSON, exactly what `up` posts (with `secrets` empty and `required_secrets` added). */
export function renderJson(request: CompiledRequest): string {
  return `${JSON.stringify(request, null, 2)}\n`;
}

/** The same document as {@link renderJson}, in YAML, with the same keys in the same order. */
export function renderYaml(request: CompiledRequest): string {
  return stringify(request, { lineWidth: 0, minContentWidth: 0 });
}

const SPEC_LABELS: readonly [string, (r: CompiledRequest) => string | undefined][] = [
  ['cpus', (r) => String(r.spec.cpus)],
  ['ram mb', (r) => String(r.spec.ram_mb)],
  ['storage gb', (r) => String(r.spec.storage_gb)],
  ['max runtime s', (r) => String(r.spec.max_runtime_seconds)],
  ['image', (r) => r.spec.image],
  [
    'gpu',
    (r) =>
      r.spec.gpu &&
      `${r.spec.gpu.model} x${r.spec.gpu.count}${r.spec.gpu.mig ? ` mig ${r.spec.gpu.mig}` : ''}`,
  ],
  ['seed snapshot', (r) => r.seed_snapshot_id],
];

/**
 * The human view: task id, spec, startup script, manifest (decoded), expose, required secrets, in
 * that fixed order; empty sections are left out. Deterministic: the same input gives the same bytes.
 * Meant for a terminal: the startup script is shown line by line, and every other character a
 * terminal would act on (a carriage return that hides the start of a line, an escape sequence, a
 * newline inside a value) is shown escaped ({@link printable}), so the view shows all there is.
 */
export function renderText({ request, manifest }: Compiled): string {
  const sections: [string, string[]][] = [];
  sections.push(['task id', [request.task_id]]);
  const rows = SPEC_LABELS.flatMap(([label, get]) => {
    const value = get(request);
    return value === undefined ? [] : [[label, value] as const];
  });
  const width = Math.max(...rows.map(([label]) => label.length));
  sections.push(['spec', rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`)]);
  sections.push(['startup script', request.startup_script.replace(/\n$/, '').split('\n')]);
  sections.push(['manifest', JSON.stringify(manifest, null, 2).split('\n')]);
  sections.push(['expose', request.expose.map((e) => `${e.port} as ${e.as}`)]);
  sections.push(['required secrets', [...request.required_secrets]]);
  return `${sections
    .filter(([, lines]) => lines.length > 0)
    .map(
      ([title, lines]) => `${title}\n${lines.map((l) => (l === '' ? '' : `  ${printable(l)}`)).join('\n')}\n`,
    )
    .join('\n')}`;
}

/** One part, undecorated, for scripts: see orchestrator.md compile rule 8. */
export function renderOnly({ request, manifestJson }: Compiled, part: OnlyPart): string {
  switch (part) {
    case 'spec':
      return `${JSON.stringify(request.spec, null, 2)}\n`;
    case 'manifest':
      return manifestJson;
    case 'startup-script':
      return request.startup_script;
    case 'secrets':
      return request.required_secrets.map((s) => `${s}\n`).join('');
    case 'expose':
      return request.expose.map((e) => `${e.port} ${e.as}\n`).join('');
  }
}
