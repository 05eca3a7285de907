/**
 * Every library of the repository (each `exports` entry with a built `default`) imports as
 * installed: plain `node`, no `source` condition, from a directory outside the repository, through
 * the package's `exports`, right after `npm install`; and the main ones do real work from there.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runAsInstalled } from '@support/pg/testing';
import { describe, expect, it } from 'vitest';

const PACKAGES = join(import.meta.dirname, '../..');

/** `name[/subpath]` of every library entry point (`./testing` entries need vitest's runner). */
const entries = readdirSync(PACKAGES).flatMap((dir) => {
  const manifest = JSON.parse(readFileSync(join(PACKAGES, dir, 'package.json'), 'utf8')) as {
    name: string;
    exports?: Record<string, { default?: string }>;
  };
  return Object.entries(manifest.exports ?? {})
    .filter(([subpath, e]) => e.default !== undefined && subpath !== './testing')
    .map(([subpath]) => join(manifest.name, subpath));
});

/** A user's program per library, and what it prints. */
const PROGRAMS: Record<string, [program: string, prints: string]> = {
  '@board/client': [
    `import { connect } from '@board/client';
     const tasks = connect({ url: 'http://127.0.0.1:8787' }).board('tasks');
     console.log(tasks.selectAll().where('id', '=', 't1').compile().sql);`,
    'select * from {{items}} where "id" = $1',
  ],
  '@board/protocol': [
    `import { isBoardId } from '@board/protocol'; console.log(isBoardId('demo'), isBoardId('../etc'));`,
    'true false',
  ],
  '@orch/protocol': [
    `import { ERROR_CODES } from '@orch/protocol'; console.log(ERROR_CODES.includes('unavailable'));`,
    'true',
  ],
  '@orch/envdef': [
    `import { compileSource } from '@orch/envdef';
     const r = compileSource('version: 1\\nimage: debian-12\\nrun:\\n  - echo ready\\n', { taskId: 'demo' });
     console.log(r.ok && r.compiled.request.task_id);`,
    'demo',
  ],
  '@support/pg': [
    `import { EmbeddedPostgres, isStoreUnavailable } from '@support/pg';
     const pg = new EmbeddedPostgres({ dataDir: '/srv/app', program: 'app', logger: console });
     console.log(isStoreUnavailable(new Error('Connection terminated')), pg.layout.pgData);`,
    'true /srv/app/pg/data',
  ],
  '@support/server': [
    `import { MAX_TIMER_MS, setLongTimeout } from '@support/server';
     setLongTimeout(() => console.log('fired early'), 30 * 24 * 3600 * 1000).unref();
     console.log(MAX_TIMER_MS);`,
    '2147483647',
  ],
};

describe('libraries import as installed', () => {
  it('finds the libraries', () => {
    expect(entries).toEqual(expect.arrayContaining(Object.keys(PROGRAMS)));
  });

  it.each(entries)('%s', async (entry) => {
    const { stdout } = await runAsInstalled(
      `const m = await import('${entry}'); console.log(Object.keys(m).length > 0);`,
    );
    expect(stdout.trim()).toBe('true');
  });

  it.each(Object.entries(PROGRAMS))('%s does its work', async (_, [program, prints]) => {
    expect((await runAsInstalled(program)).stdout.trim()).toBe(prints);
  });
});
