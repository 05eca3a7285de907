# Sourced by scripts/start.sh and scripts/test.sh: installs what is missing, idempotently.
#   ensure_node          Node >= 20 must be there (it is the one thing we do not install)
#   ensure_npm_packages  `npm install` when node_modules is missing or the lockfile or a package.json
#                        changed (its `prepare` script bundles the programs); else just bundle
#   ensure_debian NAME.. apt-get install the Debian packages that are not installed yet
set -euo pipefail

# What orch-agent runs VMs with: QEMU (microvm machine), qemu-img, the static busybox of the guest
# images, mkfs.ext4/resize2fs, lz4 (unpacks the kernel), setpriv (util-linux), mmdebstrap (the
# debian-12 image), skopeo + umoci (`orch-agent image import|pull` of OCI images), crun (manifest services, copied into the guest runtime).
AGENT_DEBIAN_PACKAGES=(qemu-system-x86 qemu-utils busybox-static e2fsprogs lz4 util-linux mmdebstrap skopeo umoci crun nftables)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ensure_node() {
  if ! command -v node >/dev/null 2>&1; then
    echo "Node.js >= 20 is required (https://nodejs.org); it is not on PATH" >&2
    exit 1
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt 20 ]; then
    echo "Node.js >= 20 is required; found $(node --version)" >&2
    exit 1
  fi
}

ensure_npm_packages() {
  # `npm install`, not `npm ci`: npm 11 prunes other platforms' optional packages (biome, esbuild)
  # from the lockfile it writes and then its own `npm ci` rejects that lockfile as out of sync.
  local stamp=node_modules/.install-stamp
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$(npm_inputs_hash)" ]; then
    log "installing npm packages"
    npm install --no-audit --no-fund
    npm_inputs_hash >"$stamp"
  else
    npm run --silent build
  fi
}

# What decides node_modules: the lockfile and every package.json.
npm_inputs_hash() {
  cat package-lock.json package.json packages/*/package.json | sha256sum | cut -d' ' -f1
}

ensure_debian() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
