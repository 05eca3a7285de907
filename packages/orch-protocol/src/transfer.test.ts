import { describe, expect, test } from 'vitest';
import { parseDestination } from './transfer.js';

describe('export destinations (parseDestination)', () => {
  const CREDENTIALS = 'destination must not embed credentials (nothing before "@", not even an empty name)';

  test.each([
    's3://@orch-exports',
    's3://@orch-exports/team',
    's3://:@orch-exports/team',
    's3://user@orch-exports/x',
    's3://user:pw@orch-exports/x',
    's3://\t@orch-exports/x',
    's3://@',
    'file://@/tmp/x',
    'file://u:p@/tmp/x',
  ])('any userinfo is refused, even an empty one the URL parser drops: %j', (raw) => {
    expect(parseDestination(raw)).toEqual({ ok: false, reason: CREDENTIALS });
  });

  test.each([
    ['s3://', 's3: destination needs a bucket name (s3://bucket/prefix)'],
    ['s3:///team', 's3: destination needs a bucket name (s3://bucket/prefix)'],
    ['s3:/orch-exports', 's3: destinations are s3://bucket/prefix'],
    ['s3:orch-exports', 's3: destinations are s3://bucket/prefix'],
    ['s3://ab', 's3: bucket must be 3-63 lowercase letters, digits, "." or "-"'],
    ['s3://Orch-Exports', 's3: bucket must be 3-63 lowercase letters, digits, "." or "-"'],
  ])('a missing or malformed bucket is named: %j', (raw, reason) => {
    expect(parseDestination(raw)).toEqual({ ok: false, reason });
  });

  test.each([
    ['s3://orch-exports', 's3://orch-exports'],
    ['s3://orch-exports/team/a', 's3://orch-exports/team/a'],
    ['S3://orch-exports/team', 's3://orch-exports/team'],
    ['s3://orch-exports/team@a', 's3://orch-exports/team@a'],
    ['file:///srv/exports', 'file:///srv/exports'],
    ['file:///srv/a@b', 'file:///srv/a@b'],
  ])('an "@" in the path is no userinfo: %j', (raw, url) => {
    const r = parseDestination(raw);
    expect(r.ok && r.value.url).toBe(url);
  });
});
