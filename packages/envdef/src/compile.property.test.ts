import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import {
  type CompileResult,
  compileSource,
  MAX_NESTING,
  ONLY_PARTS,
  renderJson,
  renderOnly,
  renderText,
  renderYaml,
} from './index.js';

/** Compile either succeeds (and every renderer works on the result) or gives well-formed diagnostics. */
function assertCompilesOrDiagnoses(text: string, fromBuild?: string): void {
  let result: CompileResult;
  try {
    result = compileSource(text, { taskId: 'p', ...(fromBuild ? { fromBuild } : {}) });
  } catch (err) {
    throw new Error(`compileSource threw on ${JSON.stringify(text)}: ${String(err)}`);
  }
  if (result.ok) {
    renderJson(result.compiled.request);
    renderYaml(result.compiled.request);
    renderText(result.compiled);
    for (const part of ONLY_PARTS) renderOnly(result.compiled, part);
    return;
  }
  expect(result.diagnostics.length).toBeGreaterThan(0);
  for (const d of result.diagnostics) {
    expect(Number.isInteger(d.line) && d.line >= 1).toBe(true);
    expect(Number.isInteger(d.col) && d.col >= 1).toBe(true);
    expect(d.message).toMatch(/^\S/);
    expect(d.message).not.toContain('\n');
    // The JavaScript engine's own words never reach a user (stack overflow, undefined, NaN).
    expect(d.message).not.toMatch(/call stack|RangeError|TypeError|undefined|NaN|\[object /);
  }
}

const scalar = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('2GiB', '1h30m', '0', '-1', 'h100', '3g.40gb', '/ws', 'web', '65536', 'debian-12'),
);
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  any: fc.oneof(
    { depthSize: 'small' },
    scalar,
    fc.array(tie('any'), { maxLength: 4 }),
    fc.dictionary(fc.string(), tie('any'), { maxKeys: 4 }),
  ),
})).any;

/** Definitions shaped like the real thing, with any field possibly holding any value. */
const nearlyValid = fc.record(
  {
    version: fc.oneof(fc.constant(1), fc.constant('1'), value),
    image: fc.oneof(fc.constant('debian-12'), value),
    resources: fc.oneof(
      fc.record(
        {
          cpus: fc.oneof(fc.integer({ min: -2, max: 2000 }), value),
          memory: fc.oneof(fc.constantFrom('2GiB', '1GB', '512MiB', '0MiB'), value),
          disk: fc.oneof(fc.constantFrom('10GiB', '1TB', '1TiB'), value),
          max_runtime: fc.oneof(fc.constantFrom('1h', '90s', '1h30m', 3600, '30m1h'), value),
          gpu: fc.oneof(
            fc.record(
              {
                model: fc.oneof(fc.constantFrom('h100', 'a100-40gb', 'l4', 'x'), value),
                count: fc.oneof(fc.integer({ min: -1, max: 3 }), value),
                mig: fc.oneof(fc.constantFrom('3g.40gb', '1g.5gb', '7g.141gb'), value),
              },
              { requiredKeys: [] },
            ),
            value,
          ),
        },
        { requiredKeys: [] },
      ),
      value,
    ),
    workspace: fc.oneof(fc.constantFrom('/workspace', 'rel', "/it's here"), value),
    setup: fc.oneof(fc.array(fc.string()), value),
    run: fc.oneof(fc.array(fc.string()), value),
    services: fc.oneof(
      fc.dictionary(
        fc.oneof(fc.constantFrom('db', 'web', '1x'), fc.string()),
        fc.record(
          {
            image: fc.oneof(fc.constant('pg'), value),
            ports: fc.oneof(fc.array(fc.integer({ min: -1, max: 70000 })), value),
            env: fc.oneof(
              fc.dictionary(
                fc.oneof(fc.constantFrom('A', 'B_2'), fc.string()),
                fc.oneof(scalar, fc.record({ value: scalar, secret: scalar }, { requiredKeys: [] }), value),
              ),
              value,
            ),
          },
          { requiredKeys: [] },
        ),
      ),
      value,
    ),
    expose: fc.oneof(
      fc.array(
        fc.record(
          {
            port: fc.oneof(fc.integer({ min: 0, max: 70000 }), value),
            as: fc.oneof(fc.constantFrom('web', 'Web', 'a-'), value),
          },
          { requiredKeys: [] },
        ),
      ),
      value,
    ),
  },
  { requiredKeys: [] },
);

/** Text built from YAML's punctuation and our field names: mostly broken, sometimes valid. */
const yamlish = fc
  .array(
    fc.constantFrom(
      'version',
      'image',
      'resources',
      'services',
      'expose',
      'run',
      'setup',
      ':',
      ': ',
      ' ',
      '  ',
      '\n',
      '\t',
      '- ',
      '[',
      ']',
      '{',
      '}',
      ',',
      '&a ',
      '*a',
      '!!str ',
      '!!binary ',
      '!foo ',
      '"',
      "'",
      '|',
      '>',
      '#',
      '1',
      '2GiB',
      '---',
      '...',
      '? ',
      '%YAML 1.2\n',
      '<<: ',
      '\\',
      '\u0000',
      '\uFEFF',
      '🙂',
    ),
    { maxLength: 60 },
  )
  .map((parts) => parts.join(''));

/**
 * Collections nested far deeper than {@link MAX_NESTING}, in any mix of YAML's ways of nesting,
 * closed or not, with the definition around them or not.
 */
const deeplyNested = fc
  .record({
    opener: fc.constantFrom('[', '{', '- ', '? ', '{a: ', '[[', '- [', '{? ', '- ? '),
    depth: fc.integer({ min: MAX_NESTING + 1, max: 5000 }),
    closed: fc.boolean(),
    wrapped: fc.boolean(),
  })
  .map(({ opener, depth, closed, wrapped }) => {
    const closer = opener.includes('[') ? ']' : opener.includes('{') ? '}' : '';
    const body = opener.repeat(depth) + (closed ? closer.repeat(depth) : '');
    return wrapped ? `version: 1\nrun:\n  - ${body}\n` : body;
  });

describe('compile never throws an unexpected exception', () => {
  test('on nesting far past the limit, which is always a diagnostic', () => {
    fc.assert(
      fc.property(deeplyNested, (text) => {
        assertCompilesOrDiagnoses(text);
        const result = compileSource(text, { taskId: 'p' });
        expect(!result.ok && result.diagnostics.map((d) => d.message)).toContain(
          `nesting deeper than ${MAX_NESTING} levels of mappings and lists`,
        );
      }),
      { numRuns: 200 },
    );
  });

  test('on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => assertCompilesOrDiagnoses(text)),
      {
        numRuns: 500,
      },
    );
  });

  test('on YAML-like token soup', () => {
    fc.assert(
      fc.property(yamlish, (text) => assertCompilesOrDiagnoses(text)),
      { numRuns: 2000 },
    );
  });

  test('on arbitrary YAML documents', () => {
    fc.assert(
      fc.property(value, (doc) => assertCompilesOrDiagnoses(stringify(doc))),
      { numRuns: 500 },
    );
  });

  test('on definition-shaped documents with arbitrary values, with and without --from-build', () => {
    fc.assert(
      fc.property(nearlyValid, fc.option(fc.constant('snap-1'), { nil: undefined }), (doc, fromBuild) =>
        assertCompilesOrDiagnoses(stringify(doc), fromBuild),
      ),
      { numRuns: 1000 },
    );
  });
});
