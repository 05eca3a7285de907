#!/usr/bin/env bash
# Quick start, command 1: install what is missing, then run the main job.
# The CLI: `orch compile` on a shipped example definition; then a board-node in the foreground on
# the embedded PostgreSQL (data in .data/board), with a demo board, until Ctrl-C.
source "$(dirname "$0")/setup.sh"
ensure_node
ensure_npm_packages

log "orch compile examples/services-secrets/orch.yaml"
npx --no-install orch compile examples/services-secrets/orch.yaml
log "the same request as JSON (what \`orch up\` posts): orch compile --format json examples/full"
npx --no-install orch compile --format json examples/full
log "try: npx orch --help"

export BOARD_DATA_DIR="${BOARD_DATA_DIR:-$ROOT/.data/board}"
export BOARD_PORT="${BOARD_PORT:-8787}"
# The local demo runs without tokens on 127.0.0.1; see packages/board-server/README.md for auth.
export BOARD_AUTH="${BOARD_AUTH:-off}"
log "board-node: demo board \`demo\` (embedded PostgreSQL under $BOARD_DATA_DIR)"
npx --no-install board-node board create demo --column title:TEXT --column points:INTEGER --if-not-exists
log "board-node on http://127.0.0.1:$BOARD_PORT (Ctrl-C stops it); try the curl commands in README.md"
exec npx --no-install board-node
