/**
 * The guest side of manifest services (README "Services"): busybox scripts installed under `/orch`
 * of every image, next to the guest agent (guest-scripts.ts).
 *
 * For each service the host attaches the service image's `rootfs.img` as one read-only virtio-blk
 * disk whose serial is `svc<i>` (i = the service's index in the manifest; device order fixed, so a
 * live restore finds the same devices) and sends, with the startup request, the service's OCI
 * runtime config (`config.json`, built by the host from the image config and the manifest, secrets
 * included: it is written only to the guest's tmpfs `/run/orch`).
 *
 *   /orch/service NAME SERIAL    mounts the disk read-only, an overlay on it (upper layer on the
 *                                VM's disk, `/orch/services/NAME`), then runs the service with crun
 *                                in a loop: restart with backoff, `failed` after too many quick exits
 *   /orch/service-log DIR        the service's stdout/stderr (and the loop's own lines) to DIR,
 *                                rotated: `current` up to SERVICE_LOG_ROTATE_BYTES, then `prev`;
 *                                `base` = bytes dropped before `prev` (byte offsets stay absolute)
 *   /orch/bin/orch-wait-port P [SECONDS]   waits until something listens on TCP port P (default 60 s)
 *
 * Status: `/run/orch/svc/NAME/status` = `STATE RESTARTS EXIT_CODE|-`, STATE one of `starting`,
 * `running`, `restarting`, `failed`.
 */

/** A log is rotated when `current` reaches this size; at most twice this is kept per service. */
export const SERVICE_LOG_ROTATE_BYTES = 512 * 1024;
/** A run shorter than this counts as a quick exit (backoff grows); a longer one resets the count. */
export const SERVICE_HEALTHY_RUN_SECONDS = 10;
/** Quick exits in a row after which a service is `failed` and no longer restarted. */
export const SERVICE_MAX_QUICK_EXITS = 5;
/** Backoff before the n-th quick restart: 1, 2, 4, 8 ... seconds, at most this. */
export const SERVICE_MAX_BACKOFF_SECONDS = 30;

/** `/orch/service NAME SERIAL`: the supervisor of one service (output goes to its log). */
export const ORCH_SERVICE = `#!/orch/bin/sh
B=/orch/bin/busybox
N=$1
SER=$2
D=/run/orch/svc/$N
P=/orch/services/$N
restarts=0
status() { printf '%s %s %s\\n' "$1" "$restarts" "$2" > $D/status.tmp; $B mv $D/status.tmp $D/status; }
fail() { echo "[orch] service $N: $1"; status failed -; exit 1; }
status starting -
dev=
for s in /sys/block/vd*/serial; do
  [ "$($B cat "$s" 2>/dev/null)" = "$SER" ] && dev=/dev/\${s#/sys/block/} && dev=\${dev%/serial}
done
[ -n "$dev" ] || fail "no disk with serial $SER (service image not attached)"
$B mkdir -p $D/lower $D/rootfs $P/upper $P/work
$B mount -t ext4 -o ro,noload "$dev" $D/lower || fail "cannot mount its image ($dev)"
$B mount -t overlay overlay -o lowerdir=$D/lower,upperdir=$P/upper,workdir=$P/work $D/rootfs || fail "cannot mount the overlay"
quick=0
while :; do
  # A container left from the previous run (crun keeps its state in /run/crun): remove it first.
  [ -e "/run/crun/orch-$N" ] && /orch/bin/crun delete -f "orch-$N" >/dev/null 2>&1
  status running "\${code:--}"
  t0=$($B cut -d. -f1 /proc/uptime)
  echo "[orch] service $N: starting"
  /orch/bin/crun run --bundle $D "orch-$N" </dev/null 3>&-
  code=$?
  t1=$($B cut -d. -f1 /proc/uptime)
  if [ $((t1 - t0)) -ge ${SERVICE_HEALTHY_RUN_SECONDS} ]; then quick=0; fi
  quick=$((quick + 1))
  if [ "$quick" -ge ${SERVICE_MAX_QUICK_EXITS} ]; then
    echo "[orch] service $N: exited with status $code; $quick quick exits in a row: failed, not restarted"
    status failed "$code"
    exit 1
  fi
  delay=$((1 << (quick - 1)))
  [ "$delay" -gt ${SERVICE_MAX_BACKOFF_SECONDS} ] && delay=${SERVICE_MAX_BACKOFF_SECONDS}
  echo "[orch] service $N: exited with status $code; restarting in \${delay} s"
  status restarting "$code"
  $B sleep "$delay"
  restarts=$((restarts + 1))
done
`;

/** `/orch/service-log DIR`: stdin to DIR/current, rotated to DIR/prev (see the module comment). */
export const ORCH_SERVICE_LOG = `#!/orch/bin/sh
/orch/bin/busybox mkdir -p "$1"
exec /orch/bin/busybox awk -v d="$1" -v max=${SERVICE_LOG_ROTATE_BYTES} '
BEGIN { f = d "/current"; printf "" > f; fflush(f); printf "0\\n" > (d "/base"); close(d "/base") }
{
  printf "%s\\n", $0 > f; fflush(f); cur += length($0) + 1
  if (cur >= max) {
    close(f); system("/orch/bin/busybox mv " d "/current " d "/prev")
    base += prev; prev = cur; cur = 0
    printf "%d\\n", base > (d "/base"); close(d "/base")
    printf "" > f; fflush(f)
  }
}'
`;

/** `/orch/bin/orch-wait-port PORT [SECONDS]`: exit 0 once a TCP socket listens on PORT, 1 after SECONDS. */
export const ORCH_WAIT_PORT = `#!/orch/bin/sh
B=/orch/bin/busybox
hex=$($B printf '%04X' "$1") || exit 2
end=$(( $($B cut -d. -f1 /proc/uptime) + \${2:-60} ))
while :; do
  # /proc/net/tcp{,6}: local address HEX:PORT, state 0A = LISTEN
  $B cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | $B awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' && exit 0
  [ "$($B cut -d. -f1 /proc/uptime)" -ge "$end" ] && { echo "orch-wait-port: nothing listens on port $1" >&2; exit 1; }
  $B usleep 100000
done
`;

/**
 * The shell script (run through the guest agent's exec) that prints every service's status line,
 * `NAME STATE RESTARTS EXIT_CODE|-`, one per line.
 */
export const SERVICE_STATUS_SCRIPT = `for d in /run/orch/svc/*/; do
  [ -r "$d/status" ] || continue
  n=\${d%/}; n=\${n##*/}
  printf '%s %s\\n' "$n" "$(/orch/bin/busybox cat "$d/status")"
done
`;
