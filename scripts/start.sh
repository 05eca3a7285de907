#!/usr/bin/env bash
# Quick start, command 1: install what is missing, then run the main job: a preview of
# `orch compile` on a shipped example, then `orchd` on its embedded defaults (Ctrl-C stops it).
source "$(dirname "$0")/setup.sh"
ensure_node
ensure_debian "${AGENT_DEBIAN_PACKAGES[@]}"
ensure_npm_packages

log "orch-agent setup: guest kernel, initramfs and base images (cached under ${AGENT_DATA_DIR:-.data/orch-agent})"
npx --no-install orch-agent setup

log "orch compile examples/services-secrets/orch.yaml"
npx --no-install orch compile examples/services-secrets/orch.yaml

# As root the embedded Postgres runs as user postgres, which must be able to reach the data dir.
if [ -z "${ORCH_DATA_DIR:-}" ]; then
  ORCH_DATA_DIR="$ROOT/.data/orchd"
  if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null; then
    ORCH_DATA_DIR=/var/lib/orchd
  fi
fi
export ORCH_DATA_DIR
log "starting orchd on http://127.0.0.1:${ORCH_PORT:-8080} (embedded store in $ORCH_DATA_DIR; Ctrl-C stops it)"
log "in another shell: MICROVM_AGENT_TOKEN=<token> npx orch-agent   (the host agent, port 9090)"
log "in another shell: npx orch connect http://127.0.0.1:${ORCH_PORT:-8080} && npx orch host list"
exec npx --no-install orchd
