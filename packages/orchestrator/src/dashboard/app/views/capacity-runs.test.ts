import { describe, expect, test } from 'vitest';
import { capacityRuns } from './capacity-runs.js';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 12, 0, s)).toISOString();
const sample = (s: number) => ({
  at: at(s),
  capacity: { cpus: 4, ram_mb: 4096, disk_gb: 100 },
  free: { cpus: 2, ram_mb: 2048, disk_gb: 50 },
});
const seconds = (runs: ReturnType<typeof capacityRuns>) =>
  runs.map((r) => r.map((s) => (Date.parse(s.at) - Date.parse(at(0))) / 1000));

describe('capacity chart runs', () => {
  test('a period without samples (the host was down) splits the line', () => {
    const samples = [0, 30, 60, 90, 600, 630, 660].map(sample);
    expect(seconds(capacityRuns(samples, 30))).toEqual([
      [0, 30, 60, 90],
      [600, 630, 660],
    ]);
  });

  test('samples at the health-check interval, wider than the bucket, are one line', () => {
    const samples = [0, 15, 30, 45, 60, 75].map(sample);
    expect(seconds(capacityRuns(samples, 5))).toEqual([[0, 15, 30, 45, 60, 75]]);
  });

  test('a lone sample between two gaps is its own run; none and one sample are handled', () => {
    expect(seconds(capacityRuns([0, 30, 300, 600, 630].map(sample), 30))).toEqual([
      [0, 30],
      [300],
      [600, 630],
    ]);
    expect(capacityRuns([], 30)).toEqual([]);
    expect(seconds(capacityRuns([sample(0)], 30))).toEqual([[0]]);
  });
});
