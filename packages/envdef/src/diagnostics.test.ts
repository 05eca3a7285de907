import { describe, expect, test } from 'vitest';
import { compileSource, formatDiagnostic } from './index.js';

/** Compiles `text` and returns the diagnostics as the CLI prints them (file name `orch.yaml`). */
function diagnose(text: string, options: { fromBuild?: string } = {}): string[] {
  const result = compileSource(text, { taskId: 't', ...options });
  if (result.ok) throw new Error('expected diagnostics, but the definition compiled');
  return result.diagnostics.map((d) => formatDiagnostic('orch.yaml', d));
}

describe('one diagnostic per class, at the line:col a user must change', () => {
  test('unknown field, with did-you-mean', () => {
    expect(diagnose('version: 1\nresorces:\n  cpus: 2\n')).toEqual([
      'orch.yaml:2:1: unknown field "resorces" at the top level (did you mean "resources"?)',
    ]);
    expect(diagnose('version: 1\nresources:\n  cpu: 2\n')).toEqual([
      'orch.yaml:3:3: unknown field "cpu" in resources (did you mean "cpus"?)',
    ]);
  });

  test('unknown field with nothing close lists the known fields', () => {
    expect(diagnose('version: 1\nexpose:\n  - port: 80\n    as: web\n    protocol: tcp\n')).toEqual([
      'orch.yaml:5:5: unknown field "protocol" in expose[0]; known fields: port, as',
    ]);
  });

  test('version other than 1', () => {
    expect(diagnose('version: 2\n')).toEqual([
      'orch.yaml:1:10: version 2 is not supported: the only version is 1',
    ]);
    expect(diagnose('version: "1.1"\n')).toEqual([
      'orch.yaml:1:10: version "1.1" is not supported: the only version is 1',
    ]);
  });

  test('missing version', () => {
    expect(diagnose('image: debian-12\n')).toEqual([
      'orch.yaml:1:1: missing required field "version": add "version: 1"',
    ]);
  });

  test('service with no image', () => {
    expect(diagnose('version: 1\nservices:\n  db:\n    ports: [5432]\n')).toEqual([
      'orch.yaml:3:3: service "db" has no image: add "image: <name>" (for example postgres:16)',
    ]);
  });

  test('env entry with both value and secret', () => {
    const text =
      'version: 1\nservices:\n  db:\n    image: postgres:16\n    env:\n      PW: { value: x, secret: pw }\n';
    expect(diagnose(text)).toEqual([
      'orch.yaml:6:7: env "PW" of service "db" sets both value and secret: keep one',
    ]);
  });

  test("a secret name the agent cannot put in the environment, or the per-VM secret's name", () => {
    // Every secret reaches the guest as an environment variable (the agent refuses any other name),
    // and ORCH_VM_SECRET is the generated per-VM secret, which would replace the value given.
    const env = (secret: string) =>
      `version: 1\nservices:\n  db:\n    image: postgres:16\n    env:\n      PW: { secret: ${secret} }\n`;
    for (const name of ['db.pw', 'db-pw', 'ORCH_VM_SECRET'])
      expect(diagnose(env(name))).toEqual([
        `orch.yaml:6:21: secret name "${name}" must be letters, digits and "_", starting with a letter or "_", at most 128, not "__proto__" or "ORCH_VM_SECRET"`,
      ]);
  });

  test('memory below what orchd accepts for spec.ram_mb (64 MiB)', () => {
    expect(diagnose('version: 1\nresources:\n  memory: 63MiB\n')).toEqual([
      'orch.yaml:3:11: resources.memory 63MiB is smaller than the minimum of 64 MiB',
    ]);
    expect(compileSource('version: 1\nresources:\n  memory: 64MiB\n', { taskId: 't' }).ok).toBe(true);
  });

  test('an env literal with a NUL (no process environment can hold one)', () => {
    expect(diagnose('version: 1\nservices:\n  db:\n    image: pg\n    env:\n      X: "a\\0b"\n')).toEqual([
      'orch.yaml:6:10: env "X" of service "db" must not contain U+0000 (NUL)',
    ]);
    expect(
      diagnose('version: 1\nservices:\n  db:\n    image: pg\n    env:\n      X: { value: "a\\0b" }\n'),
    ).toEqual(['orch.yaml:6:19: env "X" of service "db" must not contain U+0000 (NUL)']);
  });

  test('out-of-range expose port', () => {
    expect(diagnose('version: 1\nexpose:\n  - port: 70000\n    as: web\n')).toEqual([
      'orch.yaml:3:11: expose[0].port 70000 is out of range: ports are 1 to 65535',
    ]);
    expect(diagnose('version: 1\nexpose:\n  - port: 0\n    as: web\n')).toEqual([
      'orch.yaml:3:11: expose[0].port 0 is out of range: ports are 1 to 65535',
    ]);
  });

  test('malformed size', () => {
    expect(diagnose('version: 1\nresources:\n  memory: 2 GiB\n')).toEqual([
      'orch.yaml:3:11: malformed size "2 GiB" for resources.memory: write <integer><unit> with no space, unit one of MiB, GiB, TiB, MB, GB, TB, greater than zero (for example 2GiB)',
    ]);
    expect(diagnose('version: 1\nresources:\n  disk: 512MiB\n')).toEqual([
      'orch.yaml:3:9: malformed size "512MiB" for resources.disk: it must come out as a whole number of GiB',
    ]);
  });

  test('malformed duration', () => {
    expect(diagnose('version: 1\nresources:\n  max_runtime: 30m1h\n')).toEqual([
      'orch.yaml:3:16: malformed duration "30m1h" for resources.max_runtime: write groups of <integer><unit> with units d, h, m, s in that order (90s, 30m, 1h30m, 2d) or a whole number of seconds, greater than zero',
    ]);
  });

  describe('each invalid GPU/MIG combination', () => {
    const gpu = (body: string) => diagnose(`version: 1\nresources:\n  gpu:\n${body}`);
    test('unknown model', () => {
      expect(gpu('    model: h10\n')).toEqual([
        'orch.yaml:4:12: unknown GPU model "h10" (did you mean "h100"?); known models: a100-40gb, a100-80gb, h100, h200, l4, l40s, a10g',
      ]);
    });
    test('count < 1', () => {
      expect(gpu('    model: l4\n    count: 0\n')).toEqual([
        'orch.yaml:5:12: resources.gpu.count must be at least 1, got 0',
      ]);
    });
    test('mig on a model that is not MIG-capable', () => {
      expect(gpu('    model: l40s\n    mig: 1g.10gb\n')).toEqual([
        'orch.yaml:5:5: GPU model "l40s" is not MIG-capable: remove mig, or pick a100-40gb, a100-80gb, h100 or h200',
      ]);
    });
    test('a profile the model does not offer', () => {
      expect(gpu('    model: h100\n    mig: 3g.20gb\n')).toEqual([
        'orch.yaml:5:10: MIG profile "3g.20gb" is not offered by h100; it offers 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb',
      ]);
    });
    test('mig with count other than 1', () => {
      expect(gpu('    model: a100-40gb\n    count: 2\n    mig: 3g.20gb\n')).toEqual([
        'orch.yaml:5:12: a MIG profile needs count 1, got count 2: one MIG slice per environment',
      ]);
    });
  });

  test('image together with --from-build', () => {
    expect(diagnose('version: 1\nimage: debian-12\n', { fromBuild: 'snap-1' })).toEqual([
      'orch.yaml:2:1: image cannot be used with --from-build: a build artifact and an image both name the rootfs to boot; remove image, or pass --image-is-base if it is the image the artifact was built on',
    ]);
  });

  test('YAML syntax error', () => {
    expect(diagnose('version: 1\nrun: [a, b\n')).toEqual([
      'orch.yaml:3:1: YAML syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]',
    ]);
  });

  test('nesting deeper than 64 levels, at the first collection too deep, whatever its kind', () => {
    const tooDeep = 'nesting deeper than 64 levels of mappings and lists';
    // The top-level mapping and `run` are two levels, so the 63rd nested collection is one too many.
    const braces = `version: 1\nrun:\n  - ${'{'.repeat(2000)}${'}'.repeat(2000)}\n`;
    expect(diagnose(braces)).toEqual([`orch.yaml:3:${5 + 62}: ${tooDeep}`]);
    const brackets = `version: 1\nrun:\n  - ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`;
    expect(diagnose(brackets)).toEqual([`orch.yaml:3:${5 + 62}: ${tooDeep}`]);
    expect(diagnose('['.repeat(500_000))).toEqual([`orch.yaml:1:65: ${tooDeep}`]);
    const dashes = `version: 1\nrun:\n  - ${'- '.repeat(100_000)}x\n`;
    expect(diagnose(dashes)).toEqual([`orch.yaml:3:${5 + 2 * 62}: ${tooDeep}`]);
    const indented = ['a:', ...Array.from({ length: 70 }, (_, i) => `${' '.repeat(i + 1)}k${i}:`), ''];
    expect(diagnose(indented.join('\n'))).toEqual([`orch.yaml:65:65: ${tooDeep}`]);
  });

  test('nesting up to 64 levels is read (and judged by the validator)', () => {
    const deep = `version: 1\nrun:\n  - ${'['.repeat(62)}${']'.repeat(62)}\n`;
    expect(diagnose(deep)).toEqual(['orch.yaml:3:5: run[0] must be a string, got a list (quote the line)']);
  });

  test('a second YAML document', () => {
    expect(diagnose('version: 1\n---\nversion: 1\n')).toEqual([
      'orch.yaml:2:1: YAML syntax error: a definition file holds exactly one YAML document; remove the "---" separator',
    ]);
  });

  test('a version written any other way than 1 or "1"', () => {
    for (const written of ['0x1', '0o1', '01', '+1', '1.0', '1e0', '"1.0"', "' 1'"]) {
      expect(diagnose(`version: ${written}\n`)).toEqual([
        `orch.yaml:1:10: version ${written.startsWith("'") ? '" 1"' : written} is not supported: the only version is 1`,
      ]);
    }
    for (const written of ['1', '"1"', "'1'", '!!int 1', '!!str 1']) {
      expect(compileSource(`version: ${written}\n`, { taskId: 't' }).ok).toBe(true);
    }
  });

  test('a YAML tag outside the core schema, reported with every other problem', () => {
    const unknown = (tag: string) =>
      `unknown YAML tag ${tag}: a definition file uses only the YAML 1.2 core tags (!!str, !!int, !!float, !!bool, !!null, !!seq, !!map); remove it`;
    expect(diagnose('version: 1\nimage: !!js/function "x"\nresources: { cpus: 0 }\n')).toEqual([
      `orch.yaml:2:8: ${unknown('!!js/function')}`,
      'orch.yaml:3:20: resources.cpus 0 is out of range: it must be from 1 to 1024',
    ]);
    expect(diagnose('version: 1\nrun:\n  - !shell echo hi\n')).toEqual([
      `orch.yaml:3:5: ${unknown('!shell')}`,
    ]);
    expect(diagnose('version: 1\nservices: !<tag:example.com,2000:svc> {}\n')).toEqual([
      `orch.yaml:2:11: ${unknown('!<tag:example.com,2000:svc>')}`,
    ]);
    expect(diagnose('%TAG !e! tag:example.com,2000:\n---\nversion: 1\nimage: !e!img x\n')).toEqual([
      `orch.yaml:4:8: ${unknown('!e!img')}`,
    ]);
    // The value stays the text written, and that is no image name either (upper case).
    expect(diagnose('version: 1\nimage: !!binary ZGViaWFu\n')).toEqual([
      `orch.yaml:2:8: ${unknown('!!binary')}`,
      'orch.yaml:2:17: image "ZGViaWFu" must be an image name: 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
    ]);
  });

  test('a core tag on a value it does not fit', () => {
    expect(diagnose('version: 1\nresources:\n  cpus: !!int two\n')).toEqual([
      'orch.yaml:3:9: YAML tag !!int does not fit its value: remove the tag, or write a value of that type',
      'orch.yaml:3:15: resources.cpus must be an integer from 1 to 1024, got "two"',
    ]);
    expect(diagnose('version: 1\nrun: !!map [a]\n')).toEqual([
      'orch.yaml:2:6: YAML tag !!map does not fit its value: remove the tag, or write a value of that type',
    ]);
  });

  test('core tags on values they fit are plain YAML', () => {
    const text = 'version: !!int 1\nimage: !!str debian-12\nrun: !!seq [!!str 42]\nexpose: !!null\n';
    const result = compileSource(text, { taskId: 't' });
    expect(result.ok && result.compiled.request.startup_script).toBe(
      '#!/bin/sh\nset -eu\ncd /workspace\n42\n',
    );
  });

  test('a %YAML directive other than 1.2', () => {
    expect(diagnose('%YAML 1.1\n---\nversion: 1\nimage: yes\n')).toEqual([
      'orch.yaml:1:1: a definition file is YAML 1.2: remove the "%YAML 1.1" directive',
    ]);
    expect(compileSource('%YAML 1.2\n---\nversion: 1\n', { taskId: 't' }).ok).toBe(true);
  });

  test('what a diagnostic quotes is shown with its control characters escaped, on one line', () => {
    expect(diagnose('version: 1\n"\\e[8mimage\\e[0m\\rrun": x\n')).toEqual([
      'orch.yaml:2:1: unknown field "\\u001b[8mimage\\u001b[0m\\rrun" at the top level; known fields: version, image, resources, workspace, setup, run, services, expose',
    ]);
    expect(formatDiagnostic('a\nb.yaml', { line: 1, col: 1, message: 'x\u009by' })).toBe(
      'a\\nb.yaml:1:1: x\\u009by',
    );
  });

  test('duplicate keys', () => {
    expect(diagnose('version: 1\nimage: a\nimage: b\n')).toEqual([
      'orch.yaml:3:1: duplicate key "image" at the top level (first defined at 2:1)',
    ]);
  });

  test('an empty file', () => {
    expect(diagnose('')).toEqual([
      'orch.yaml:1:1: the definition file is empty: it needs at least "version: 1"',
    ]);
    expect(diagnose('# only a comment\n')).toEqual([
      'orch.yaml:1:1: the definition file is empty: it needs at least "version: 1"',
    ]);
  });
});

test('every problem is reported together, in reading order', () => {
  const text = [
    'version: 3',
    'image: debian-12',
    'resources:',
    '  memory: lots',
    '  gpu: { model: l4, mig: 1g.5gb }',
    'services:',
    '  db: { ports: [5432] }',
    'expose:',
    '  - { port: 99999, as: Web }',
    'imgae: x',
    '',
  ].join('\n');
  expect(diagnose(text, { fromBuild: 's' })).toEqual([
    'orch.yaml:1:10: version 3 is not supported: the only version is 1',
    'orch.yaml:2:1: image cannot be used with --from-build: a build artifact and an image both name the rootfs to boot; remove image, or pass --image-is-base if it is the image the artifact was built on',
    'orch.yaml:4:11: malformed size "lots" for resources.memory: write <integer><unit> with no space, unit one of MiB, GiB, TiB, MB, GB, TB, greater than zero (for example 2GiB)',
    'orch.yaml:5:21: GPU model "l4" is not MIG-capable: remove mig, or pick a100-40gb, a100-80gb, h100 or h200',
    'orch.yaml:7:3: service "db" has no image: add "image: <name>" (for example postgres:16)',
    'orch.yaml:9:13: expose[0].port 99999 is out of range: ports are 1 to 65535',
    'orch.yaml:9:24: expose[0].as "Web" must be a DNS label: lowercase letters, digits and "-", starting with a letter, at most 63',
    'orch.yaml:10:1: unknown field "imgae" at the top level (did you mean "image"?)',
  ]);
});

describe('further checks a user would want explained', () => {
  test.each([
    [
      'version: 1\nresources:\n  cpus: two\n',
      'orch.yaml:3:9: resources.cpus must be an integer from 1 to 1024, got "two"',
    ],
    [
      'version: 1\nresources:\n  cpus: 0\n',
      'orch.yaml:3:9: resources.cpus 0 is out of range: it must be from 1 to 1024',
    ],
    [
      'version: 1\nworkspace: app\n',
      'orch.yaml:2:12: workspace must be an absolute guest path (starting with "/"), got "app"',
    ],
    [
      'version: 1\nrun: ./serve.sh\n',
      'orch.yaml:2:6: run (a list of shell lines) must be a list, got "./serve.sh"',
    ],
    [
      'version: 1\nsetup:\n  - echo: hi\n',
      'orch.yaml:3:5: setup[0] must be a string, got a mapping (quote the line)',
    ],
    [
      'version: 1\nexpose:\n  - { port: 80, as: web }\n  - { port: 81, as: web }\n',
      'orch.yaml:4:21: expose[1].as "web" is already used at 3:21; names must be unique',
    ],
    [
      'version: 1\nservices:\n  db:\n    image: pg\n    env:\n      PW:\n',
      'orch.yaml:6:10: env "PW" of service "db" must be a string, number or boolean, or { secret: <name> }, got nothing',
    ],
    ['- a\n- b\n', 'orch.yaml:1:1: the definition file must be a mapping, got a list'],
  ])('%j', (text, line) => {
    expect(diagnose(text)).toEqual([line]);
  });
});

/** Compiles `text` and says whether it compiled. */
const compiles = (text: string) => compileSource(text, { taskId: 't' }).ok;

describe('what orchd or the agent would refuse for a static reason does not compile', () => {
  const services = (n: number) =>
    `version: 1\nservices:\n${Array.from({ length: n }, (_, i) => `  s${i}: { image: pg }\n`).join('')}`;
  const expose = (n: number) =>
    `version: 1\nexpose:\n${Array.from({ length: n }, (_, i) => `  - { port: ${i + 1}, as: p${i} }\n`).join('')}`;

  test('more than 16 services (MAX_SERVICES of the manifest check), said once at the 17th', () => {
    expect(compiles(services(16))).toBe(true);
    expect(diagnose(services(18))).toEqual([
      'orch.yaml:19:3: service "s16" is one too many: an environment runs at most 16 services',
    ]);
  });

  test('more than 64 expose entries (orchd: expose at most 64), said once at the 65th', () => {
    expect(compiles(expose(64))).toBe(true);
    expect(diagnose(expose(66))).toEqual([
      'orch.yaml:67:5: expose[64] is one too many: an environment exposes at most 64 ports',
    ]);
  });
});

describe('images: what an agent can boot or run', () => {
  test('spec.image is an image name, as orchd and the agent require', () => {
    expect(compiles('version: 1\nimage: debian-12\n')).toBe(true);
    expect(diagnose('version: 1\nimage: "Debian 12"\n')).toEqual([
      'orch.yaml:2:8: image "Debian 12" must be an image name: 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
    ]);
    expect(diagnose(`version: 1\nimage: ${'a'.repeat(64)}\n`)).toHaveLength(1);
  });

  test("a service's image names an image a host can have (an image name or an OCI reference)", () => {
    const svc = (image: string) => `version: 1\nservices:\n  db:\n    image: ${JSON.stringify(image)}\n`;
    for (const ok of ['postgres:16', 'reg:5000/lib/web@sha256:ab12cd34ef56ab12', 'busybox-httpd'])
      expect(compiles(svc(ok))).toBe(true);
    expect(diagnose(svc(':16'))).toEqual([
      'orch.yaml:4:12: service "db" image ":16" names no image a host can have: its image name "-16" is not 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
    ]);
    expect(diagnose(svc(`x${'a'.repeat(1024)}`))).toEqual([
      `orch.yaml:4:12: service "db" image "x${'a'.repeat(39)}..." must be at most 1024 characters`,
    ]);
  });
});

test('an env name is a variable name, the rule of the manifest check (at most 256 characters)', () => {
  const env = (name: string) => `version: 1\nservices:\n  db:\n    image: pg\n    env:\n      ${name}: x\n`;
  expect(compiles(env(`A${'b'.repeat(255)}`))).toBe(true);
  expect(diagnose(env('my-var'))).toEqual([
    'orch.yaml:6:7: env name "my-var" of service "db" must be a variable name: letters, digits and "_", starting with a letter or "_", at most 256',
  ]);
  expect(diagnose(env(`A${'b'.repeat(256)}`))).toHaveLength(1);
});

describe('a startup script or manifest longer than orchd takes (512 KiB each), at the line or service that passes it', () => {
  const big = 'x'.repeat(300 * 1024);

  test('startup_script: the setup or run line that passes the limit', () => {
    expect(compiles(`version: 1\nrun:\n  - echo ${big}\n`)).toBe(true);
    // 32: "#!/bin/sh", "set -eu" and "cd /workspace", each with its newline.
    expect(diagnose(`version: 1\nsetup:\n  - echo ${big}\nrun:\n  - echo ${big}\n`)).toEqual([
      `orch.yaml:5:5: run[0] makes the startup script ${32 + 2 * (big.length + 6)} characters long, more than the 524288 orchd takes (startup_script): keep large content in files of the workspace, not in setup or run lines`,
    ]);
    // With --from-build the setup lines are not in the script.
    const fromBuild = `version: 1\nsetup:\n  - echo ${big}\n  - echo ${big}\nrun:\n  - ./serve\n`;
    expect(diagnose(fromBuild)).toHaveLength(1);
    expect(diagnose(fromBuild)[0]).toMatch(/^orch\.yaml:4:5: setup\[1\] makes the startup script/);
    expect(compileSource(fromBuild, { taskId: 't', fromBuild: 'snap' }).ok).toBe(true);
  });

  test('manifest_inline: the service that passes the limit (base64 of the manifest)', () => {
    const svc = (name: string, value: string) => `  ${name}:\n    image: pg\n    env: { V: ${value} }\n`;
    const half = 'y'.repeat(200 * 1024);
    expect(compiles(`version: 1\nservices:\n${svc('a', half)}`)).toBe(true);
    const [line, ...rest] = diagnose(
      `version: 1\nservices:\n${svc('a', half)}${svc('b', half)}${svc('c', 'z')}`,
    );
    expect(rest).toEqual([]);
    expect(line).toMatch(
      /^orch\.yaml:6:3: service "b" makes the manifest \d+ characters of base64 long, more than the 524288 orchd takes \(manifest_inline\): shorten the env values of the services$/,
    );
  });
});

test('setup/run lines and the workspace keep the text rule of orchd; the workspace is at most 4096 characters', () => {
  // YAML's "\ud800" escape makes a lone surrogate, which orchd refuses in startup_script and the manifest.
  expect(diagnose('version: 1\nrun:\n  - "echo \\ud800"\n')).toEqual([
    'orch.yaml:3:5: run[0] must be well-formed Unicode (it has a lone surrogate)',
  ]);
  expect(diagnose('version: 1\nsetup: ["a\\0b"]\n')).toEqual([
    'orch.yaml:2:9: setup[0] must not contain U+0000 (NUL)',
  ]);
  expect(diagnose('version: 1\nworkspace: "/w\\udc00"\n')).toEqual([
    'orch.yaml:2:12: workspace must be well-formed Unicode (it has a lone surrogate), got "/w\\udc00"',
  ]);
  expect(compiles(`version: 1\nworkspace: /${'w'.repeat(4095)}\n`)).toBe(true);
  expect(diagnose(`version: 1\nworkspace: /${'w'.repeat(4096)}\n`)).toEqual([
    `orch.yaml:2:12: workspace must be at most 4096 characters, got "/${'w'.repeat(39)}..."`,
  ]);
});
