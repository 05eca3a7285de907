import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/**
 * Workspace packages resolve to their TypeScript sources (the `source` condition of each entry of
 * their `exports` map, `@support/pg/testing` included), not to dist/.
 */
const workspaceAliases = readdirSync('packages').flatMap((dir) => {
  const manifest = JSON.parse(readFileSync(join('packages', dir, 'package.json'), 'utf8')) as {
    name: string;
    exports?: Record<string, { source?: string }>;
  };
  return Object.entries(manifest.exports ?? {}).flatMap(([subpath, conditions]) =>
    conditions.source
      ? [
          {
            find: new RegExp(`^${join(manifest.name, subpath).replace(/[/.]/g, '\\$&')}$`),
            replacement: join(import.meta.dirname, 'packages', dir, conditions.source),
          },
        ]
      : [],
  );
});

const testDirs = ['packages/*/src/**/', 'packages/*/test/**/'];

export default defineConfig({
  resolve: { conditions: ['source'], alias: workspaceAliases },
  test: {
    globalSetup: ['scripts/vitest-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Vitest's default, one worker fewer than there are cores, is a single worker on this two-core
    // machine: the unit suites ran one file at a time (13 min). They mostly wait on PostgreSQL,
    // child processes and sockets, so three at once take about 8 min. VM suites: see their projects.
    maxWorkers: 3,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: testDirs.map((d) => `${d}*.test.ts`),
          exclude: ['**/node_modules/**', '**/*.vm.test.ts'],
        },
      },
      // Suites that boot QEMU VMs: after every other suite, so that their CPU-heavy guests do not
      // slow the other suites down; one file at a time. Two at a time kept 1.8 of the 2 cores busy
      // instead of 1.3 and took 295-333 s instead of about 440 s, and passed three runs; but each
      // file ran 1.2-1.5x slower beside another, eating into the guests' boot deadlines on a
      // machine that may be busier than ours was, so CI keeps the margin.
      {
        extends: true,
        test: {
          name: 'vm',
          include: testDirs.map((d) => `${d}*.vm.test.ts`),
          exclude: ['**/node_modules/**', '**/stress.vm.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
      // The boot stress test keeps every core busy on purpose: last, alone.
      {
        extends: true,
        test: {
          name: 'vm-stress',
          include: testDirs.map((d) => `${d}stress.vm.test.ts`),
          fileParallelism: false,
          sequence: { groupOrder: 2 },
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
});
