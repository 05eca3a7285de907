import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['source'] },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['scripts/vitest-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
