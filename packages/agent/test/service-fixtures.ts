import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const sh = (cmd: string, cwd?: string) => execFileSync('sh', ['-c', cmd], { cwd, encoding: 'utf8' });

/**
 * Builds, offline with umoci and skopeo, the OCI image the service tests run: a static busybox whose
 * Entrypoint `/bin/start` prints `service <NAME> starting as uid <uid> in <cwd>` and then runs
 * `httpd -f -p $PORT -h /www` (PORT from the image Env: 8080), or exits 3 at once when `CRASH` is
 * set. `/www/cgi-bin/info` answers `name=<NAME> greeting=<GREETING> token=<API_TOKEN> uid=<uid>`.
 * Config: User `www` (uid 100 in its /etc/passwd), WorkingDir `/www`, Env `PORT=8080`,
 * `GREETING=from-image`, `NAME=unnamed`. Returns the `oci-archive` path.
 */
export function buildServiceImage(dir: string): string {
  const layout = join(dir, 'svc-layout');
  const bundle = join(dir, 'svc-bundle');
  sh(`umoci init --layout ${layout} && umoci new --image ${layout}:web`);
  sh(`umoci unpack --image ${layout}:web ${bundle}`);
  const root = join(bundle, 'rootfs');
  for (const d of ['bin', 'etc', 'tmp', 'www/cgi-bin']) mkdirSync(join(root, d), { recursive: true });
  sh(`cp /bin/busybox ${root}/bin/busybox && chmod 1777 ${root}/tmp`);
  for (const applet of ['sh', 'cat', 'echo', 'id', 'pwd', 'httpd', 'sleep'])
    symlinkSync('busybox', join(root, 'bin', applet));
  writeFileSync(
    join(root, 'bin/start'),
    '#!/bin/sh\necho "service $NAME starting as uid $(id -u) in $(pwd)"\n' +
      'if [ -n "$CRASH" ]; then echo "service $NAME crashing" >&2; exit 3; fi\n' +
      'exec httpd -f -p "$PORT" -h /www\n',
    { mode: 0o755 },
  );
  writeFileSync(
    join(root, 'www/cgi-bin/info'),
    '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n' +
      'echo "name=$NAME greeting=$GREETING token=$API_TOKEN uid=$(id -u)"\n',
    { mode: 0o755 },
  );
  writeFileSync(join(root, 'www/index.html'), 'index\n');
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nwww:x:100:101:www:/www:/bin/sh\n');
  writeFileSync(join(root, 'etc/group'), 'root:x:0:\nwww:x:101:\n');
  sh(`umoci repack --image ${layout}:web ${bundle} && rm -rf ${bundle}`);
  sh(
    `umoci config --image ${layout}:web --config.env PATH=/bin --config.env PORT=8080 ` +
      `--config.env GREETING=from-image --config.env NAME=unnamed --config.workingdir /www ` +
      `--config.user www --config.entrypoint /bin/start`,
  );
  const archive = join(dir, 'service.oci.tar');
  sh(`skopeo --insecure-policy copy --quiet oci:${layout}:web oci-archive:${archive}`);
  return archive;
}
