#!/usr/bin/env bash
# Quick start, command 1: install what is missing, then run the local stack until Ctrl-C:
#   - a preview of `orch compile` on a shipped example definition;
#   - orchd on its embedded PostgreSQL (data in .data/orchd): API and dashboard on :8080;
#   - orch-agent (real QEMU microVMs; kernel and images from `orch-agent setup`) on :9090,
#     registered with orchd as host `local`, and the `orch` CLI connected to orchd;
#   - board-node on its embedded PostgreSQL (data in .data/board) with a demo board, on :8787.
source "$(dirname "$0")/setup.sh"
ensure_node
ensure_debian "${AGENT_DEBIAN_PACKAGES[@]}"
ensure_npm_packages

log "orch-agent setup: guest kernel, initramfs and base images (cached under ${AGENT_DATA_DIR:-.data/orch-agent})"
npx --no-install orch-agent setup

log "orch compile examples/services-secrets/orch.yaml"
npx --no-install orch compile examples/services-secrets/orch.yaml

export ORCH_DATA_DIR="${ORCH_DATA_DIR:-$ROOT/.data/orchd}"
export ORCH_PORT="${ORCH_PORT:-8080}"
export AGENT_PORT="${AGENT_PORT:-9090}"
# One token shared by orchd (its default microvm-agent token) and the local agent. It is kept
# (0600, in orchd's data dir, not the agent's) so that it outlives a restart: a Ctrl-C suspends the
# agent's VMs with their memory encrypted under a key derived from this token, and the next start
# resumes them (packages/agent/README.md, "Agent restart").
if [ -z "${MICROVM_AGENT_TOKEN:-}" ]; then
  token_file="$ORCH_DATA_DIR/microvm-agent-token"
  mkdir -p "$ORCH_DATA_DIR"
  [ -s "$token_file" ] || (umask 077 && node -p 'require("crypto").randomBytes(24).toString("base64url")' > "$token_file")
  MICROVM_AGENT_TOKEN="$(cat "$token_file")"
fi
export MICROVM_AGENT_TOKEN
export BOARD_DATA_DIR="${BOARD_DATA_DIR:-$ROOT/.data/board}"
export BOARD_PORT="${BOARD_PORT:-8787}"
# The local demo runs without tokens on 127.0.0.1; see packages/board-server/README.md for auth.
export BOARD_AUTH="${BOARD_AUTH:-off}"

pids=()
stop_all() {
  trap - INT TERM EXIT
  [ "${#pids[@]}" -eq 0 ] || kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
}
trap stop_all INT TERM EXIT

log "board-node: demo board \`demo\` (embedded PostgreSQL under $BOARD_DATA_DIR)"
npx --no-install board-node board create demo --column title:TEXT --column points:INTEGER --if-not-exists
# Each service runs in a session of its own (setsid), so a Ctrl-C reaches only this script, which
# then stops each service with exactly one SIGTERM: a second signal would cut the agent's graceful
# stop short (it pauses the running VMs, to resume them at its next start).
start_service() {
  setsid node "$@" &
  pids+=($!)
}
start_service packages/board-server/bin/board-node.js
start_service packages/orchestrator/bin/orchd.js
start_service packages/agent/bin/orch-agent.js

# Register the local agent once both answer (orchd's auth is off unless ORCH_AUTH_TOKEN is set).
orch_url="http://127.0.0.1:$ORCH_PORT"
node -e '
  const urls = process.argv.slice(1);
  const up = async (u) => { try { await fetch(u); return true; } catch { return false; } };
  (async () => { for (let i = 0; i < 240; i++) { if ((await Promise.all(urls.map(up))).every(Boolean)) return; await new Promise((r) => setTimeout(r, 500)); } })();
' "$orch_url/session" "http://127.0.0.1:$AGENT_PORT/v1/info"
connect=(npx --no-install orch connect "$orch_url" --name local)
[ -z "${ORCH_AUTH_TOKEN:-}" ] || connect+=(--token "$ORCH_AUTH_TOKEN" --master)
"${connect[@]}" && npx --no-install orch host register --url "http://127.0.0.1:$AGENT_PORT" --id local

log "orchd on $orch_url (dashboard in a browser; embedded store in $ORCH_DATA_DIR)"
log "try: npx orch up examples/hello && npx orch env list && npx orch exec <env> -- uname -a"
log "board-node on http://127.0.0.1:$BOARD_PORT (try the curl commands in README.md)"
log "Ctrl-C stops everything"
# Runs until Ctrl-C, or until one of the services exits (then the others are stopped too).
wait -n
