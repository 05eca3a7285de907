#!/usr/bin/env bash
# Quick start, command 1: install what is missing, then run the main job.
# For now the main job is the CLI: `orch compile` on a shipped example definition.
source "$(dirname "$0")/setup.sh"
ensure_node
ensure_npm_packages

log "orch compile examples/services-secrets/orch.yaml"
npx --no-install orch compile examples/services-secrets/orch.yaml
log "the same request as JSON (what \`orch up\` posts): orch compile --format json examples/full"
npx --no-install orch compile --format json examples/full
log "try: npx orch --help"
