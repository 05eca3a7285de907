// Where the VM tests' guest kernel, initramfs and images live (`orch-agent setup` builds them; every
// test agent links them into a data dir of its own). Prints the directory.
//
//   node scripts/test-agent-assets.mjs           the directory (marked as used now, if it exists)
//   node scripts/test-agent-assets.mjs --prune   the same, created if missing; the other keys'
//                                                directories not used for PRUNE_DAYS are removed
//
// ORCH_TEST_AGENT_ASSETS names the directory outright. Otherwise it is a per-user cache, so that a
// fresh clone does not build them again (about 4 minutes; Debian's image alone most of it):
// ${XDG_CACHE_HOME:-~/.cache}/orch/test-agent-assets/<key>. `setup` rebuilds what its stamps say
// changed (guest runtime scripts, host busybox and crun, the Debian recipe and apt sources, kernel
// modules), but not a change in the code that builds them; the key is a hash of that code
// (packages/agent/src/images), so a clone whose image code differs gets directories of its own:
// the tests always run on images built by the code under test, and two clones of different
// versions never replace each other's images under running tests.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const IMAGE_CODE = join(ROOT, 'packages/agent/src/images');
const USED = '.last-used';
const PRUNE_DAYS = 7;

/** The assets directory of this checkout. */
export function testAgentAssets(env = process.env) {
  if (env.ORCH_TEST_AGENT_ASSETS) return resolve(env.ORCH_TEST_AGENT_ASSETS);
  return join(cacheRoot(env), imageCodeKey());
}

function cacheRoot(env) {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'orch', 'test-agent-assets');
}

/** A hash of the sources that decide what setup builds (tests excluded). */
export function imageCodeKey() {
  const h = createHash('sha256');
  for (const name of readdirSync(IMAGE_CODE).sort()) {
    if (!name.endsWith('.ts') || name.endsWith('.test.ts')) continue;
    h.update(`${name}\0`)
      .update(readFileSync(join(IMAGE_CODE, name)))
      .update('\0');
  }
  return h.digest('hex').slice(0, 16);
}

/** Marks `dir` as used now. */
function markUsed(dir) {
  writeFileSync(join(dir, USED), `${new Date().toISOString()}\n`);
}

/** Removes the other keys' directories unused for PRUNE_DAYS. */
function prune(dir, env) {
  if (env.ORCH_TEST_AGENT_ASSETS) return;
  const root = cacheRoot(env);
  const cutoff = Date.now() - PRUNE_DAYS * 86_400_000;
  for (const name of readdirSync(root)) {
    const other = join(root, name);
    if (other === dir) continue;
    // When it was last used (made, for one that never was); gone meanwhile: nothing to do.
    const used = [join(other, USED), other]
      .map((p) => statSync(p, { throwIfNoEntry: false })?.mtimeMs)
      .find((t) => t !== undefined);
    if (used !== undefined && used < cutoff) rmSync(other, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const dir = testAgentAssets();
  if (process.argv.includes('--prune')) {
    mkdirSync(dir, { recursive: true });
    prune(dir, process.env);
  }
  if (existsSync(dir)) markUsed(dir);
  console.log(dir);
}
