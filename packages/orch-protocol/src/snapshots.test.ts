import { expect, test } from 'vitest';
import { CreateSnapshotBody } from './index.js';

/** The issues of parsing `body`, as `field: message`. */
const issues = (body: unknown) =>
  (CreateSnapshotBody.safeParse(body).error?.issues ?? []).map((i) => `${i.path.join('.')}: ${i.message}`);

test('export_status is stored with an export: without export_destination it is refused, not dropped', () => {
  expect(issues({ export_status: 'queued' })).toEqual([
    'export_status: needs export_destination (the status of an export requested at create)',
  ]);
  expect(issues({ export_status: 'queued', export_destination: 'file:///x' })).toEqual([]);
  expect(issues({ export_status: '' })).toEqual([]);
  expect(CreateSnapshotBody.parse({})).toEqual({ live: false, mode: '', export_status: '' });
});
