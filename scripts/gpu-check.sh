#!/usr/bin/env bash
# Device check of a GPU host (issue 36): runs GPU detection through the product (a real orch-agent
# with GPU_AGENT_TOKEN on loopback, its own temporary data dir) and prints /v1/info's GPU part as
# the agent reports it; where KVM, an IOMMU and vfio-pci are present and a GPU is free, boots a VM
# with one whole GPU passed through, runs lspci in it, deletes it and checks the GPU went back to
# the host driver. No network access is needed; on a machine without GPUs it only reports that.
#
#   scripts/gpu-check.sh                 # detection, and the boot where possible (root needed to bind vfio-pci)
#   GPU_CHECK_BOOT=0 scripts/gpu-check.sh   # detection only
#   GPU_CHECK_ASSETS=DIR                 # kernel and images to boot (default: .data/orch-agent, made by npm start)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f packages/agent/dist/orch-agent.js ] || npm run build >/dev/null
exec node scripts/gpu-check.mjs "$@"
