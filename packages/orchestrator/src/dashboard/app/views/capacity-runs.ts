import type { HostCapacityHistory } from '@orch/protocol';

type Sample = HostCapacityHistory['samples'][number];

/**
 * Splits a host's capacity samples (oldest first) into runs drawn as separate lines: a period with
 * no samples (the host was down, or no health check reached it) is a gap in the chart, never a
 * straight line from the last sample before it to the first after. Two neighbours belong to one
 * run when they are at most 2.5 intervals apart, the interval being the larger of the bucket and
 * the usual (median) spacing of the samples: with buckets of 5 s and a health check every 15 s
 * the samples are 15 s apart, and that is no gap. Pure (no DOM), so it is unit-tested.
 *
 * @example capacityRuns(samples, 30) // [[s0, s1, s2], [s3, s4]]: nothing between s2 and s3
 */
export function capacityRuns(samples: readonly Sample[], bucketSeconds: number): Sample[][] {
  const times = samples.map((s) => Date.parse(s.at));
  const steps = times
    .slice(1)
    .map((t, i) => t - (times[i] ?? t))
    .sort((a, b) => a - b);
  const usual = steps.length > 0 ? (steps[Math.floor((steps.length - 1) / 2)] ?? 0) : 0;
  const maxStep = 2.5 * Math.max(bucketSeconds * 1000, usual);
  const runs: Sample[][] = [];
  samples.forEach((s, i) => {
    const prev = times[i - 1];
    const current = runs.at(-1);
    if (current && prev !== undefined && (times[i] ?? prev) - prev <= maxStep) current.push(s);
    else runs.push([s]);
  });
  return runs;
}
