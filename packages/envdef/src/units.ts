/**
 * Sizes and durations as the definition file writes them (environment-definition.md, "Units").
 * Arithmetic is done in BigInt bytes so that no unit combination loses precision.
 */

const SIZE_UNITS: Readonly<Record<string, bigint>> = {
  MiB: 1n << 20n,
  GiB: 1n << 30n,
  TiB: 1n << 40n,
  MB: 1_000_000n,
  GB: 1_000_000_000n,
  TB: 1_000_000_000_000n,
};

const SIZE_RE = /^([0-9]+)(MiB|GiB|TiB|MB|GB|TB)$/;

/** Why a size could not be used; `undefined` from the parsers below means it was fine. */
export type UnitProblem =
  | { readonly kind: 'malformed' }
  | { readonly kind: 'not-whole'; readonly unit: string };

/**
 * Parses a size such as `2GiB` and expresses it in whole multiples of `unit` (`MiB` or `GiB`).
 *
 * @example
 * parseSize('2GiB', 'MiB') // { value: 2048 }
 * parseSize('1GB', 'MiB')  // { problem: { kind: 'not-whole', unit: 'MiB' } }
 */
export function parseSize(
  text: string,
  unit: 'MiB' | 'GiB',
): { readonly value: number } | { readonly problem: UnitProblem } {
  const m = SIZE_RE.exec(text);
  if (!m) return { problem: { kind: 'malformed' } };
  const bytes = BigInt(m[1]!) * SIZE_UNITS[m[2]!]!;
  if (bytes === 0n) return { problem: { kind: 'malformed' } };
  const per = SIZE_UNITS[unit]!;
  if (bytes % per !== 0n) return { problem: { kind: 'not-whole', unit } };
  const value = bytes / per;
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) return { problem: { kind: 'malformed' } };
  return { value: Number(value) };
}

const DURATION_RE = /^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$/;
const DURATION_UNITS = [86_400n, 3_600n, 60n, 1n] as const;

/**
 * Parses a duration (`90s`, `30m`, `1h30m`, `2d`, or a bare integer of seconds) into seconds.
 * Returns `undefined` for zero, empty, out-of-order or otherwise malformed input.
 *
 * @example
 * parseDuration('1h30m') // 5400
 * parseDuration('30m1h') // undefined
 */
export function parseDuration(text: string): number | undefined {
  let seconds: bigint;
  if (/^[0-9]+$/.test(text)) {
    seconds = BigInt(text);
  } else {
    const m = DURATION_RE.exec(text);
    if (!m || text === '') return undefined;
    seconds = 0n;
    for (let i = 0; i < DURATION_UNITS.length; i++) {
      const group = m[i + 1];
      if (group !== undefined) seconds += BigInt(group) * DURATION_UNITS[i]!;
    }
  }
  if (seconds === 0n || seconds > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return Number(seconds);
}
