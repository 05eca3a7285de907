import { describe, expect, test } from 'vitest';
import { EnvironmentsRepo } from './environments-repo.js';
import { SnapshotsRepo } from './snapshots-repo.js';

/**
 * The repositories enforce the state machines of @orch/protocol: a conditional update that names a
 * move the drawn diagram does not allow is refused before any query runs (the store is not even
 * touched here), so a reconciler can never move `stopped` to `error` again.
 */
describe('repositories refuse transitions outside the protocol tables', () => {
  const untouched = new Proxy(
    {},
    {
      get() {
        throw new Error('the store was used');
      },
    },
  ) as never;

  test('environments', async () => {
    const repo = new EnvironmentsRepo(untouched);
    await expect(repo.transition('env_1', ['creating', 'stopped'], 'error')).rejects.toThrow(
      'illegal state transition: stopped -> error',
    );
    await expect(repo.transition('env_1', ['error'], 'running')).rejects.toThrow(/error -> running/);
    await expect(repo.transition('env_1', ['creating'], 'stopped')).rejects.toThrow(/creating -> stopped/);
    // An allowed move reaches the store.
    await expect(repo.transition('env_1', ['creating'], 'running')).rejects.toThrow('the store was used');
  });

  test('snapshots', async () => {
    const repo = new SnapshotsRepo(untouched);
    await expect(repo.transition('snap_1', ['error'], 'restoring')).rejects.toThrow(/error -> restoring/);
    await expect(repo.transition('snap_1', ['creating'], 'deleting')).rejects.toThrow(/creating -> deleting/);
    await expect(repo.transition('snap_1', ['ready'], 'restoring')).rejects.toThrow('the store was used');
  });
});
