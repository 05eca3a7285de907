import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@support/pg/test-server';
import { AGENT_BIN } from './agent-process.js';

/** Whether skopeo, umoci and the registry are installed. Under CI=true their absence fails the suite. */
export function ociToolsAvailable(): boolean {
  const found = ['skopeo', 'umoci', 'docker-registry', 'openssl', 'debugfs'].every(
    (t) => spawnSync('sh', ['-c', `command -v ${t}`]).status === 0,
  );
  if (!found && process.env.CI === 'true')
    throw new Error('skopeo, umoci, docker-registry, openssl and debugfs are required for images.vm.test.ts');
  return found;
}

const sh = (cmd: string, cwd?: string) => execFileSync('sh', ['-c', cmd], { cwd, encoding: 'utf8' });

/**
 * Builds a two-layer OCI image offline with umoci, from a static busybox: layer 1 has
 * /etc/gone and /etc/kept, layer 2 deletes /etc/gone (a whiteout) and adds /etc/added. Its config
 * sets Env (PATH with /custom/bin, GREETING), WorkingDir, User, Entrypoint and Cmd. Returns the
 * layout dir (tag `v2`), an `oci-archive` and a `docker-archive` of it.
 */
export function buildOciImage(dir: string): { layout: string; ociArchive: string; dockerArchive: string } {
  const layout = join(dir, 'layout');
  const bundle = join(dir, 'bundle');
  sh(`umoci init --layout ${layout} && umoci new --image ${layout}:v1`);
  sh(`umoci unpack --image ${layout}:v1 ${bundle}`);
  const root = join(bundle, 'rootfs');
  for (const d of ['bin', 'etc', 'root', 'tmp', 'custom/bin']) mkdirSync(join(root, d), { recursive: true });
  sh(`cp /bin/busybox ${root}/bin/busybox`);
  for (const applet of ['sh', 'cat', 'ls', 'echo', 'test', 'readlink', 'env', 'pwd', 'id']) {
    symlinkSync('busybox', join(root, 'bin', applet));
  }
  writeFileSync(join(root, 'custom/bin/hello'), '#!/bin/sh\necho "hello from $GREETING"\n', { mode: 0o755 });
  writeFileSync(join(root, 'etc/gone'), 'deleted by layer 2\n');
  writeFileSync(join(root, 'etc/kept'), 'layer 1\n');
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  sh(`umoci repack --image ${layout}:v1 ${bundle} && rm -rf ${bundle}`);
  sh(`umoci unpack --image ${layout}:v1 ${bundle}`);
  sh(`rm ${bundle}/rootfs/etc/gone && echo 'layer 2' > ${bundle}/rootfs/etc/added`);
  sh(`umoci repack --image ${layout}:v2 ${bundle} && rm -rf ${bundle}`);
  sh(
    `umoci config --image ${layout}:v2 --config.env PATH=/custom/bin:/usr/bin:/bin --config.env GREETING=oci ` +
      `--config.workingdir /etc --config.user root --config.entrypoint /bin/sh --config.cmd -c --config.cmd hello`,
  );
  // `noshell`: one file and no shell at all (as a distroless image): exec falls back to /orch/bin.
  writeFileSync(join(dir, 'note.txt'), 'no shell here\n');
  sh(
    `umoci new --image ${layout}:noshell && umoci insert --image ${layout}:noshell ${dir}/note.txt /note.txt`,
  );
  const ociArchive = join(dir, 'image.oci.tar');
  const dockerArchive = join(dir, 'image.docker.tar');
  sh(`skopeo --insecure-policy copy --quiet oci:${layout}:v2 oci-archive:${ociArchive}`);
  sh(
    `skopeo --insecure-policy copy --quiet oci:${layout}:v2 docker-archive:${dockerArchive}:localhost/ocibox:v2`,
  );
  return { layout, ociArchive, dockerArchive };
}

/** Runs `orch-agent ARGS` and returns its status and output. */
export function agentCli(
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [AGENT_BIN, ...args], {
    encoding: 'utf8',
    timeout: 600_000,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Debian's `docker-registry` (distribution 2.8) on loopback with TLS (own CA) and htpasswd auth. */
export class TestRegistry {
  private constructor(
    private readonly proc: ChildProcess,
    readonly host: string,
    /** A directory with the CA certificate, for skopeo's --cert-dir / AGENT_REGISTRY_CERT_DIR. */
    readonly certDir: string,
    readonly user: string,
    readonly password: string,
  ) {}

  static async start(dir: string): Promise<TestRegistry> {
    const port = await freePort();
    const certDir = join(dir, 'certs');
    mkdirSync(certDir, { recursive: true });
    sh(
      `openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 ` +
        `-keyout ${dir}/key.pem -out ${dir}/cert.pem 2>/dev/null && cp ${dir}/cert.pem ${certDir}/ca.crt`,
    );
    const user = 'puller';
    const password = `pw-${Math.random().toString(36).slice(2)}`;
    const hash = execFileSync(
      'python3',
      [
        '-W',
        'ignore',
        '-c',
        'import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))',
        password,
      ],
      { encoding: 'utf8' },
    ).trim();
    writeFileSync(join(dir, 'htpasswd'), `${user}:${hash}\n`);
    writeFileSync(
      join(dir, 'config.yml'),
      [
        'version: 0.1',
        'log: {level: error}',
        `storage: {filesystem: {rootdirectory: ${dir}/data}}`,
        `http: {addr: "127.0.0.1:${port}", tls: {certificate: ${dir}/cert.pem, key: ${dir}/key.pem}}`,
        `auth: {htpasswd: {realm: test, path: ${dir}/htpasswd}}`,
        '',
      ].join('\n'),
    );
    const proc = spawn('docker-registry', ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
    const host = `127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (spawnSync('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`]).status === 0) break;
      if (i > 300 || proc.exitCode !== null) throw new Error('docker-registry did not start');
      await new Promise((res) => setTimeout(res, 100));
    }
    return new TestRegistry(proc, host, certDir, user, password);
  }

  /** Pushes an OCI layout tag to `REPO:TAG` here; returns the pushed manifest's digest. */
  push(source: string, repoTag: string, dir: string): string {
    const digestFile = join(dir, 'pushed.digest');
    sh(
      `skopeo --insecure-policy copy --quiet --dest-cert-dir ${this.certDir} --dest-creds ${this.user}:${this.password} ` +
        `--digestfile ${digestFile} ${source} docker://${this.host}/${repoTag}`,
    );
    return readFileSync(digestFile, 'utf8').trim();
  }

  stop(): void {
    this.proc.kill('SIGTERM');
  }
}
