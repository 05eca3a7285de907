#!/usr/bin/env bash
# Quick start, command 1: install what is missing, then run the local stack until Ctrl-C:
#   - a preview of `orch compile` on a shipped example definition;
#   - board-node on its embedded PostgreSQL (data in .data/board) with a demo board, on :8787;
#   - orchd on its embedded PostgreSQL (data in .data/orchd): API and dashboard on :8080.
source "$(dirname "$0")/setup.sh"
ensure_node
ensure_npm_packages

log "orch compile examples/services-secrets/orch.yaml"
npx --no-install orch compile examples/services-secrets/orch.yaml

export ORCH_DATA_DIR="${ORCH_DATA_DIR:-$ROOT/.data/orchd}"
export ORCH_PORT="${ORCH_PORT:-8080}"
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
npx --no-install board-node &
pids+=($!)

npx --no-install orchd &
pids+=($!)

log "board-node on http://127.0.0.1:$BOARD_PORT (try the curl commands in README.md)"
log "orchd on http://127.0.0.1:$ORCH_PORT (dashboard in a browser; embedded store in $ORCH_DATA_DIR)"
log "in another shell: npx orch connect http://127.0.0.1:$ORCH_PORT && npx orch host list"
log "Ctrl-C stops everything"
# Runs until Ctrl-C, or until one of the services exits (then the others are stopped too).
wait -n
