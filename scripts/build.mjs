// Bundles each program into one ESM file under its package's dist/, so that `npx orch` starts
// by loading a single small file. Run by `npm install` (root `prepare`) and by the test command.
import { rm } from 'node:fs/promises';
import { build } from 'esbuild';

const programs = [{ entry: 'packages/cli/src/main.ts', outdir: 'packages/cli/dist', name: 'orch' }];

await Promise.all(
  programs.map(async (p) => {
    await rm(p.outdir, { recursive: true, force: true });
    await build({
      entryPoints: { [p.name]: p.entry },
      outdir: p.outdir,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      conditions: ['source'],
      legalComments: 'none',
      logLevel: 'warning',
      // CommonJS dependencies (commander) call require() for Node built-ins.
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
    });
  }),
);
