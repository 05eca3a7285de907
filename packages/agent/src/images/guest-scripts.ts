/**
 * The guest side of the agent: shell scripts run by busybox inside every VM. `setup` writes them
 * into the initramfs (`/init`) and into every image under `/orch/` (with a static busybox and
 * resize2fs), so that any root filesystem, ours or an imported one, boots the same way.
 *
 * Boot:  kernel -> initramfs /init (load virtio modules, mount /dev/vda, switch_root)
 *        -> /orch/init (PID 1: mounts, network, grow the filesystem, console shell, guest agent)
 *
 * The guest agent speaks a line protocol over the virtio-serial port `agent0` (README "Guest agent
 * line protocol"). Every field is a token without spaces: ids, numbers, or base64.
 */

/** Kernel modules the initramfs loads, in this order (modprobe resolves dependencies). */
export const GUEST_MODULES = [
  'virtio_mmio',
  // A VM with GPUs passed through is a q35 machine: its virtio devices are on PCI (gpu/).
  'virtio_pci',
  'virtio_blk',
  'virtio_net',
  'virtio_console',
  'virtio_rng',
  'overlay',
];

/** Printed on the serial console by the initramfs when the kernel command line has `orch.probe`. */
export const PROBE_MARKER = 'ORCH-PROBE-OK';

/** The initramfs `/init`. */
export const INITRAMFS_INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in ${GUEST_MODULES.join(' ')}; do modprobe "$m" 2>/dev/null; done
if grep -q 'orch.probe' /proc/cmdline; then
  echo ${PROBE_MARKER}
  poweroff -f
fi
i=0
while [ ! -b /dev/vda ]; do
  i=$((i + 1))
  if [ "$i" -gt 3000 ]; then echo "orch: no root disk /dev/vda"; poweroff -f; fi
  usleep 10000
done
mkdir -p /newroot
if ! mount -t ext4 -o rw /dev/vda /newroot; then echo "orch: cannot mount /dev/vda"; poweroff -f; fi
for d in dev proc sys run tmp; do mkdir -p /newroot/$d; done
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /orch/init
`;

/** `/orch/init`: PID 1 of the root filesystem. */
export const ORCH_INIT = `#!/orch/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/orch/bin
export HOME=/root
B=/orch/bin/busybox
$B mkdir -p /dev/pts /run /tmp /root
$B mount -t devpts devpts /dev/pts 2>/dev/null
$B mount -t tmpfs -o mode=0755,nosuid tmpfs /run
$B mount -t tmpfs -o mode=1777,nosuid tmpfs /tmp
# crun (manifest services) wants cgroup2 on /sys/fs/cgroup.
$B mkdir -p /sys/fs/cgroup
$B mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
$B hostname "$($B sed -n 's/.*orch.hostname=\\([^ ]*\\).*/\\1/p' /proc/cmdline)"
$B ip link set lo up
$B ip link set eth0 up 2>/dev/null
$B ip addr add 10.0.2.15/24 dev eth0 2>/dev/null
$B ip route add default via 10.0.2.2 2>/dev/null
# DNS through the user-mode network's resolver (it forwards to the host's). A dangling symlink
# (systemd-resolved in some images) would swallow the write: replace whatever is there.
if [ -w /etc ]; then $B rm -f /etc/resolv.conf; echo 'nameserver 10.0.2.3' > /etc/resolv.conf; fi
[ -e /etc/hosts ] || echo '127.0.0.1 localhost' > /etc/hosts 2>/dev/null
# The disk is larger than the image: grow the filesystem to it (online, a fraction of a second).
/orch/bin/resize2fs /dev/vda >/dev/null 2>&1
# The image's own userland: its environment (Env of an OCI image config), with the runtime's
# busybox applets last on PATH, only for what the image lacks.
[ -r /orch/image.env ] && . /orch/image.env
case ":$PATH:" in *:/orch/bin:*) ;; *) export PATH="$PATH:/orch/bin" ;; esac
# ORCH_SH: the shell of exec, the startup script and the console. The image's /bin/sh when it has
# a working one (dash, bash, its busybox), else the runtime's.
ORCH_SH=/orch/bin/sh
[ -x /bin/sh ] && /bin/sh -c : 2>/dev/null && ORCH_SH=/bin/sh
export ORCH_SH
/orch/bin/sh /orch/console &
/orch/bin/sh /orch/guest-agent &
# PID 1 reaps every orphan: ash's wait blocks in waitpid(-1) while its own jobs run.
while :; do wait; $B sleep 1; done
`;

/** `/orch/console`: an interactive shell on the serial console, respawned when it exits. */
export const ORCH_CONSOLE = `#!/orch/bin/sh
while :; do
  TERM=vt100 PS1='\\h:\\w# ' /orch/bin/setsid -c "\${ORCH_SH:-/orch/bin/sh}" -l </dev/ttyS0 >/dev/ttyS0 2>&1
  /orch/bin/sleep 0.2
done
`;

/** `/orch/guest-agent`: the exec/startup/ping agent on the virtio-serial port `agent0`. */
export const ORCH_GUEST_AGENT = `#!/orch/bin/sh
# Requests (host -> guest), one line each, fields separated by one space:
#   p ID                                     ping; answer: P ID UPTIME_SECONDS
#   x ID TIMEOUT LIMIT SCRIPT_B64 STDIN_B64  run SCRIPT (sh) with STDIN ('-': none) in its own session;
#                                            answer: X ID CODE|- TIMED_OUT(0|1) OUT_B64 ERR_B64 OUT_BYTES ERR_BYTES
#                                            (OUT_B64/ERR_B64 hold at most LIMIT bytes; '-' when empty)
#   s ID SCRIPT_B64 ENV_B64 MANIFEST_B64 [SERVICES_B64]
#                                            start the manifest's services (SERVICES: lines
#                                            NAME DISK_SERIAL CONFIG_JSON_B64, guest-services.ts), then
#                                            the startup script with ENV (sourced, then deleted) and its
#                                            output on port log0; answer: S ID
#   t ID EPOCH_SECONDS                       set the clock; answer: T ID
# Unsolicited (guest -> host): H - UPTIME_SECONDS each time the agent opens the port: the guest is
# ready. The host writes nothing before it has seen H (bytes written to a port the guest has not
# opened yet can stay stuck in QEMU's socket chardev).
# PATH and ORCH_SH (the image's shell, or the runtime's) come from /orch/init.
B=/orch/bin/busybox
S=\${ORCH_SH:-/orch/bin/sh}
R=/run/orch
$B mkdir -p $R/x
$B chmod 700 $R
port() {
  for d in /sys/class/virtio-ports/*; do
    [ "$($B cat "$d/name" 2>/dev/null)" = "$1" ] && { echo "/dev/\${d##*/}"; return; }
  done
}
while :; do AG=$(port agent0); [ -n "$AG" ] && [ -c "$AG" ] && break; $B usleep 50000; done
LOGP=$(port log0)
# Request fields are split on spaces; base64 has no glob characters, but never glob them anyway.
set -f
b64() { if [ -s "$1" ]; then $B head -c "$2" "$1" | $B base64 -w 0; else printf -; fi; }
unb64() { if [ "$1" = - ]; then : ; else printf '%s' "$1" | $B base64 -d; fi; }
# One writer at a time on the port: mkdir is the lock.
send() {
  until $B mkdir $R/wlock 2>/dev/null; do $B usleep 2000; done
  $B cat "$1" >&3
  $B rmdir $R/wlock
}
say() {
  f=$R/x/say.$1
  printf '%s\\n' "$2" > "$f"
  send "$f"
  $B rm -f "$f"
}
do_exec() {
  d=$R/x/$1
  $B mkdir -p "$d"
  unb64 "$4" > "$d/cmd"
  unb64 "$5" > "$d/in"
  # 3>&-: no command keeps the agent port open (the port must be reopened after the host side
  # closes, when an agent restart re-adopts this VM; a port is open at most once).
  $B setsid "$S" "$d/cmd" < "$d/in" > "$d/out" 2> "$d/err" 3>&- &
  pid=$!
  $B setsid /orch/bin/sh -c "$B sleep $2; $B touch $d/timeout; $B kill -KILL -$pid 2>/dev/null || $B kill -KILL $pid" >/dev/null 2>&1 3>&- &
  wd=$!
  wait $pid
  code=$?
  $B kill -KILL -$wd 2>/dev/null
  to=0
  if [ -e "$d/timeout" ]; then to=1; code=-; fi
  {
    printf 'X %s %s %s ' "$1" "$code" "$to"
    b64 "$d/out" "$3"
    printf ' '
    b64 "$d/err" "$3"
    printf ' %s %s\\n' "$($B stat -c %s "$d/out")" "$($B stat -c %s "$d/err")"
  } > "$d/resp"
  send "$d/resp"
  $B rm -rf "$d"
}
do_startup() {
  (umask 077; unb64 "$2" > $R/startup.sh; unb64 "$3" > $R/startup.env; unb64 "$4" > $R/manifest.json)
  # Services first (secrets in their config.json: tmpfs only), each under its supervisor.
  unb64 "$5" | while read -r sn sser scfg; do
    [ -n "$sn" ] || continue
    $B mkdir -p $R/svc/$sn
    (umask 077; unb64 "$scfg" > $R/svc/$sn/config.json)
    ( $B setsid /orch/bin/sh -c "/orch/service $sn $sser 2>&1 | /orch/service-log $R/svc/$sn/log" < /dev/null > /dev/null 2>&1 3>&- ) &
  done
  ( cd /
    ORCH_MANIFEST=$R/manifest.json HOME=/root $B setsid "$S" -c ". $R/startup.env; $B rm -f $R/startup.env; $S $R/startup.sh; echo \\"[orch] startup script exited with status \\$?\\"" < /dev/null > "\${LOGP:-/dev/null}" 2>&1 3>&- ) &
  say "$1" "S $1"
}
handle() {
  set -- $1
  case "$1" in
    p) say "$2" "P $2 $($B cut -d' ' -f1 /proc/uptime)" ;;
    x) do_exec "$2" "$3" "$4" "$5" "$6" ;;
    s) do_startup "$2" "$3" "$4" "$5" "$6" ;;
    t) $B date -u -s "@$3" >/dev/null 2>&1; say "$2" "T $2" ;;
  esac
}
while :; do
  exec 3<>"$AG"
  say hello "H - $($B cut -d' ' -f1 /proc/uptime)"
  while IFS= read -r line <&3; do
    handle "$line" &
  done
  exec 3<&-
  $B usleep 100000
done
`;
