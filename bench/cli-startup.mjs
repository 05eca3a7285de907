// Wall time of `orch compile` against `node -e 0` (the floor any Node CLI pays), and against the
// obvious alternative to our bundle: running the same TypeScript sources through tsx, unbundled.
// Runs are interleaved so that machine noise hits every contender alike; medians are reported.
//
//   node bench/cli-startup.mjs [runs]        (default 40)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const runs = Number(process.argv[2] ?? 40);
const args = ['compile', 'examples/services-secrets/orch.yaml', '--format', 'json'];
const contenders = [
  { name: 'node -e 0', argv: [process.execPath, '-e', '0'] },
  {
    name: 'orch compile (bundled, as shipped)',
    argv: [process.execPath, 'packages/cli/bin/orch.js', ...args],
  },
  {
    name: 'orch compile via tsx (unbundled sources)',
    argv: [process.execPath, '--import', 'tsx', '--conditions=source', 'packages/cli/src/main.ts', ...args],
  },
];

const times = contenders.map(() => []);
for (let i = 0; i < runs + 2; i++) {
  contenders.forEach((c, j) => {
    const start = process.hrtime.bigint();
    const r = spawnSync(c.argv[0], c.argv.slice(1), { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (r.status !== 0) throw new Error(`${c.name} failed: ${r.stderr}`);
    if (i >= 2) times[j].push(ms); // the first two rounds warm the page cache
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const base = median(times[0]);
console.log(`runs: ${runs} each, interleaved; median wall time`);
for (const [j, c] of contenders.entries()) {
  const m = median(times[j]);
  console.log(`${c.name.padEnd(42)} ${m.toFixed(1).padStart(7)} ms   ${(m / base).toFixed(2)}x node -e 0`);
}
const ratio = median(times[1]) / base;
console.log(`\norch compile / node -e 0 = ${ratio.toFixed(2)} (budget: 3.00)`);
console.log(`tsx alternative / bundled = ${(median(times[2]) / median(times[1])).toFixed(2)}`);
