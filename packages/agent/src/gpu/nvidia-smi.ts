import { spawn } from 'node:child_process';
import { type GpuMigInstance, type GpuMigProfile, migProfileName } from '@orch/protocol';

/**
 * `nvidia-smi` as the agent runs it, and parsers of its documented output formats. Parsers are
 * pure and strict: a line that does not have the shape asked for makes the whole answer unusable
 * (an error naming the line), never a guessed value.
 */

/** The fields of `--query-gpu`, in the order the CSV answers them. */
export const QUERY_FIELDS = [
  'index',
  'uuid',
  'name',
  'pci.bus_id',
  'memory.total',
  'memory.used',
  'mig.mode.current',
  'driver_version',
] as const;

/** The argv of each query (after the program). */
export const SMI_QUERIES = {
  gpus: [`--query-gpu=${QUERY_FIELDS.join(',')}`, '--format=csv,noheader,nounits'],
  list: ['-L'],
  migProfiles: ['mig', '-lgip'],
  migInstances: ['mig', '-lgi'],
  migComputeInstances: ['mig', '-lci'],
} as const;

/** One row of `--query-gpu`. */
export interface SmiGpu {
  readonly index: number;
  readonly uuid: string;
  readonly name: string;
  /** In sysfs form, lower case: `0000:18:00.0` (nvidia-smi prints `00000000:18:00.0`). */
  readonly pciAddress: string;
  readonly memoryMib: number;
  readonly memoryUsedMib: number;
  readonly migMode: 'enabled' | 'disabled' | 'unsupported';
  readonly driverVersion: string;
}

/** nvidia-smi printed something these parsers cannot read. */
export class SmiParseError extends Error {
  override readonly name = 'SmiParseError';
}

const NOT_AVAILABLE = /^\[(N\/A|Not Supported)\]$/i;

/** `00000000:18:00.0` or `0000:18:00.0` -> `0000:18:00.0`; undefined for anything else. */
export function pciAddress(busId: string): string | undefined {
  const m = /^(?:[0-9a-f]{4})?([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$/i.exec(busId.trim());
  return m ? `${m[1]}:${m[2]}:${m[3]}.${m[4]}`.toLowerCase() : undefined;
}

function whole(v: string, field: string, line: string): number {
  if (!/^\d+$/.test(v)) throw new SmiParseError(`${field} is ${JSON.stringify(v)}, not a number: ${line}`);
  return Number(v);
}

/**
 * `--query-gpu=...` with `--format=csv,noheader,nounits`: one line per GPU, values separated by
 * `, `. Values never contain a comma here (names do not), so a line with another number of
 * columns is an error rather than a guess.
 */
export function parseQueryGpu(out: string): SmiGpu[] {
  const gpus: SmiGpu[] = [];
  for (const raw of out.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length !== QUERY_FIELDS.length)
      throw new SmiParseError(
        `a --query-gpu line has ${cells.length} columns, not ${QUERY_FIELDS.length}: ${line}`,
      );
    const [index, uuid, name, busId, total, used, mig, driver] = cells as [string, ...string[]];
    const address = pciAddress(busId!);
    if (!address)
      throw new SmiParseError(`pci.bus_id ${JSON.stringify(busId)} is not a PCI address: ${line}`);
    if (!/^GPU-[0-9a-f-]+$/i.test(uuid!))
      throw new SmiParseError(`uuid ${JSON.stringify(uuid)} is not a GPU UUID`);
    const mode = mig!.toLowerCase();
    gpus.push({
      index: whole(index, 'index', line),
      uuid: uuid!,
      name: name!,
      pciAddress: address,
      memoryMib: whole(total!, 'memory.total', line),
      memoryUsedMib: NOT_AVAILABLE.test(used!) ? 0 : whole(used!, 'memory.used', line),
      migMode: mode === 'enabled' ? 'enabled' : mode === 'disabled' ? 'disabled' : 'unsupported',
      driverVersion: driver!,
    });
    if (!['enabled', 'disabled'].includes(mode) && !NOT_AVAILABLE.test(mig!))
      throw new SmiParseError(`mig.mode.current is ${JSON.stringify(mig)}: ${line}`);
  }
  return gpus;
}

/** `nvidia-smi -L`: `GPU 0: NAME (UUID: GPU-...)`, then `  MIG 1g.10gb Device 0: (UUID: MIG-...)` lines. */
export function parseList(out: string): { index: number; name: string; uuid: string; mig: string[] }[] {
  const gpus: { index: number; name: string; uuid: string; mig: string[] }[] = [];
  for (const raw of out.split('\n')) {
    const line = raw.trimEnd();
    if (line.trim() === '') continue;
    const gpu = /^GPU (\d+): (.+) \(UUID: (GPU-[0-9a-f-]+)\)$/i.exec(line);
    if (gpu) {
      gpus.push({ index: Number(gpu[1]), name: gpu[2]!, uuid: gpu[3]!, mig: [] });
      continue;
    }
    const mig = /^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[0-9a-f/-]+)\)$/i.exec(line);
    if (mig && gpus.length > 0) {
      gpus.at(-1)!.mig.push(migProfileName(mig[1]!));
      continue;
    }
    throw new SmiParseError(`unexpected nvidia-smi -L line: ${line}`);
  }
  return gpus;
}

/** Rows of an nvidia-smi box table (`|   0  MIG 1g.10gb  ... |`) that start with a GPU index. */
function tableRows(out: string): string[][] {
  const rows: string[][] = [];
  for (const raw of out.split('\n')) {
    const line = raw.trim();
    // Entry rows start with a GPU index and name a `MIG` profile; headers and the second line of
    // a -lgip entry (CE/JPEG/OFA counts) do not.
    if (!/^\|\s+\d/.test(line) || !/\sMIG\s/.test(line)) continue;
    rows.push(
      line
        .replace(/^\||\|$/g, '')
        .trim()
        .split(/\s+/),
    );
  }
  return rows;
}

/** Tables are framed by `+---+` and `|` lines; anything else means nvidia-smi said something else. */
function requireTable(out: string, what: string): void {
  const lines = out.split('\n').filter((l) => l.trim() !== '');
  const stray = lines.find((l) => !/^\s*[|+]/.test(l));
  if (stray !== undefined) throw new SmiParseError(`unexpected line in ${what}: ${stray.trim()}`);
}

/**
 * `nvidia-smi mig -lgip`: per GPU and profile, `| GPU  MIG <profile>  <id>  <free>/<total>  <GiB> ...`
 * (the second line of each entry, CE/JPEG/OFA, starts without a GPU index and is skipped).
 */
export function parseMigProfiles(out: string): Map<number, GpuMigProfile[]> {
  requireTable(out, 'nvidia-smi mig -lgip');
  const by = new Map<number, GpuMigProfile[]>();
  for (const cells of tableRows(out)) {
    // [gpu, 'MIG', profile, id, free/total, memory, ...]
    const [gpu, mig, profile, id, instances, memory] = cells;
    const counts = /^(\d+)\/(\d+)$/.exec(instances ?? '');
    if (mig !== 'MIG' || !profile || !/^\d+$/.test(id ?? '') || !counts || !/^[\d.]+$/.test(memory ?? ''))
      throw new SmiParseError(`unexpected nvidia-smi mig -lgip row: ${cells.join(' ')}`);
    const list = by.get(Number(gpu)) ?? [];
    list.push({
      profile: migProfileName(profile),
      profile_id: Number(id),
      creatable: Number(counts[1]),
      max: Number(counts[2]),
      memory_gb: Number(memory),
    });
    by.set(Number(gpu), list);
  }
  return by;
}

/** `nvidia-smi mig -lgi`: `| GPU  MIG <profile>  <profile id>  <instance id>  <start>:<size> |`. */
export function parseMigInstances(out: string): Map<number, { profile: string; gi: number }[]> {
  requireTable(out, 'nvidia-smi mig -lgi');
  const by = new Map<number, { profile: string; gi: number }[]>();
  for (const cells of tableRows(out)) {
    const [gpu, mig, profile, profileId, gi, placement] = cells;
    if (
      mig !== 'MIG' ||
      !profile ||
      !/^\d+$/.test(profileId ?? '') ||
      !/^\d+$/.test(gi ?? '') ||
      !/^\d+:\d+$/.test(placement ?? '')
    )
      throw new SmiParseError(`unexpected nvidia-smi mig -lgi row: ${cells.join(' ')}`);
    const list = by.get(Number(gpu)) ?? [];
    list.push({ profile: migProfileName(profile), gi: Number(gi) });
    by.set(Number(gpu), list);
  }
  return by;
}

/** `nvidia-smi mig -lci`: `| GPU  <GI id>  MIG <profile>  <CI profile id>  <CI id>  <start>:<size> |`; counts per GPU and GI. */
export function parseMigComputeInstances(out: string): Map<string, number> {
  requireTable(out, 'nvidia-smi mig -lci');
  const counts = new Map<string, number>();
  for (const cells of tableRows(out)) {
    const [gpu, gi, mig, profile, , ci] = cells;
    if (!/^\d+$/.test(gi ?? '') || mig !== 'MIG' || !profile || !/^\d+$/.test(ci ?? ''))
      throw new SmiParseError(`unexpected nvidia-smi mig -lci row: ${cells.join(' ')}`);
    const key = `${gpu}/${gi}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** Joins `-lgi` and `-lci` into the instances of one GPU. */
export function migInstancesOf(
  gpu: number,
  instances: Map<number, { profile: string; gi: number }[]>,
  computes: Map<string, number>,
): GpuMigInstance[] {
  return (instances.get(gpu) ?? []).map((i) => ({
    profile: i.profile,
    gi: i.gi,
    compute_instances: computes.get(`${gpu}/${i.gi}`) ?? 0,
  }));
}

/** `mig -lgi`/`-lci` on a GPU without instances answer this (exit 6) rather than an empty table. */
export const NO_MIG_INSTANCES = /No (GPU|compute) instances? (were )?found|No MIG-enabled devices found/i;

/** How nvidia-smi ended: its output, or why it failed. */
export type SmiResult =
  | { readonly ok: true; readonly stdout: string }
  | {
      readonly ok: false;
      readonly missing: boolean;
      readonly exitCode: number | null;
      readonly output: string;
    };

/** Longest one nvidia-smi call may take (a GPU fallen off the bus makes it hang). */
export const SMI_TIMEOUT_MS = 15_000;

/** Runs `nvidia-smi ARGS` without a shell; never throws. */
export function runSmi(
  program: string,
  args: readonly string[],
  timeoutMs = SMI_TIMEOUT_MS,
): Promise<SmiResult> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    const keep = (into: Buffer[]) => (b: Buffer) => {
      size += b.length;
      if (size <= 4 * 2 ** 20) into.push(b);
    };
    child.stdout.on('data', keep(out));
    child.stderr.on('data', keep(err));
    child.once('error', (e: NodeJS.ErrnoException) =>
      resolve({ ok: false, missing: e.code === 'ENOENT', exitCode: null, output: e.message }),
    );
    child.once('close', (code, signal) => {
      const stdout = Buffer.concat(out).toString('utf8');
      if (code === 0) return resolve({ ok: true, stdout });
      const text = `${Buffer.concat(err).toString('utf8')}${stdout}`.trim();
      resolve({
        ok: false,
        missing: false,
        exitCode: code,
        output: signal ? `killed by ${signal} after ${timeoutMs} ms${text ? `: ${text}` : ''}` : text,
      });
    });
  });
}
