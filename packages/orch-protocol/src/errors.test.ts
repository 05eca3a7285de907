import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  ERROR_CODES,
  ERROR_STATUS,
  errorFromBody,
  issuesDetails,
  MAX_DETAIL_ISSUES,
  OrchError,
} from './index.js';

describe('OrchError and errorFromBody', () => {
  test('an error survives the wire: toBody, JSON, errorFromBody give the same code, message, details, status', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...ERROR_CODES),
        fc.string(),
        // `__proto__` is the one key the parser drops on purpose (see the next test).
        fc.option(
          fc.dictionary(
            fc.string({ minLength: 1 }).filter((k) => k !== '__proto__'),
            fc.jsonValue(),
          ),
          { nil: undefined },
        ),
        fc.option(fc.integer({ min: 400, max: 599 }), { nil: undefined }),
        (code, message, details, status) => {
          const sent = new OrchError(code, message, details, status);
          const got = errorFromBody(sent.status, JSON.parse(JSON.stringify(sent.toBody())));
          expect(got).toBeInstanceOf(OrchError);
          expect([got.code, got.message, got.status]).toEqual([code, message, status ?? ERROR_STATUS[code]]);
          expect(got.details ?? {}).toEqual(JSON.parse(JSON.stringify(details ?? {})));
        },
      ),
    );
  });

  test('a __proto__ key in details is dropped, never set as a prototype', () => {
    const body = JSON.parse(
      '{"error":{"code":"not_found","message":"m","details":{"__proto__":{"polluted":1},"k":2}}}',
    );
    const got = errorFromBody(404, body);
    expect(got.details).toEqual({ k: 2 });
    expect(Object.getPrototypeOf(got.details)).toBe(Object.prototype);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });

  test('an answer that is not the envelope still becomes an OrchError, by status', () => {
    expect(errorFromBody(502, 'Bad Gateway')).toMatchObject({ code: 'internal', status: 502 });
    expect(errorFromBody(503, undefined)).toMatchObject({ code: 'unavailable', status: 503 });
    expect(errorFromBody(429, 'Too Many Requests')).toMatchObject({ code: 'unavailable', status: 429 });
    expect(errorFromBody(404, '<html>')).toMatchObject({ code: 'route_not_found', status: 404 });
    expect(errorFromBody(400, { error: { code: 'nope', message: 'x' } })).toMatchObject({
      code: 'invalid_argument',
      status: 400,
    });
  });

  test('helpers carry the reasons the agent README documents', () => {
    expect(OrchError.diskFull('full').toBody()).toEqual({
      error: { code: 'unavailable', message: 'full', details: { reason: 'disk_full' } },
    });
    expect(OrchError.missingTool('qemu', 'apt-get install qemu').details).toMatchObject({
      reason: 'missing_tool',
    });
    expect(OrchError.notFound('host', 'h1')).toMatchObject({ status: 404, details: { id: 'h1' } });
    expect(new OrchError('internal', 'x').toBody().error).not.toHaveProperty('details');
  });

  test('rateLimited: 429 unavailable with whole seconds (at least 1) in details and Retry-After', () => {
    const e = OrchError.rateLimited('too many', 41.2);
    expect(e).toMatchObject({ code: 'unavailable', status: 429, headers: { 'Retry-After': '42' } });
    expect(e.toBody().error.details).toEqual({ reason: 'rate_limited', retry_after_seconds: 42 });
    expect(OrchError.rateLimited('too many', 0).headers['Retry-After']).toBe('1');
  });

  test('busy: 503 unavailable with its reason, whole seconds (at least 1) and Retry-After', () => {
    const e = OrchError.busy('queue full', 'placement_queue_full', 1.5, { queued: 3 });
    expect(e).toMatchObject({ code: 'unavailable', status: 503, headers: { 'Retry-After': '2' } });
    expect(e.toBody().error.details).toEqual({
      reason: 'placement_queue_full',
      retry_after_seconds: 2,
      queued: 3,
    });
    expect(OrchError.busy('x', 'y', 0).headers['Retry-After']).toBe('1');
  });

  test('issue details are capped: the first 20 and a count, however many issues there are', () => {
    const issues = Array.from({ length: 100_000 }, (_, i) => ({
      path: ['required_secrets', i],
      message: 'x'.repeat(1000),
    }));
    const d = issuesDetails(issues);
    expect(d.issues).toHaveLength(MAX_DETAIL_ISSUES);
    expect(d.issue_count).toBe(100_000);
    expect(d.issues[0]).toEqual({ field: 'required_secrets.0', message: 'x'.repeat(200) });
    expect(JSON.stringify(d).length).toBeLessThan(8192);
  });
});
