#!/usr/bin/env bash
# Quick start, command 2: install what is missing, then lint, type-check, build and run every test.
# Under CI=true a suite whose system dependency is missing fails; it is never skipped.
source "$(dirname "$0")/setup.sh"
ensure_node
# strace: the test proving `orch compile` opens no socket watches the process's system calls.
# postgresql-15: the server store (DATABASE_URL) of the orchd and board-node suites, beside the embedded one.
# chromium: the dashboard tests (*.browser.test.ts) drive Debian's Chromium with playwright-core.
# qemu-system-x86 ... umoci: orch-agent's microVMs and images in the *.vm.test.ts suites (see packages/agent).
# docker-registry: the loopback registry images.vm.test.ts pulls from.
registry_preinstalled="$(dpkg-query -W -f='${Status}' docker-registry 2>/dev/null | grep -c 'install ok installed' || true)"
# iproute2: `ip netns` + veth, the multi-host suite (packages/orchestrator/test/travel.vm.test.ts).
ensure_debian strace postgresql-15 chromium docker-registry iproute2 "${AGENT_DEBIAN_PACKAGES[@]}"
# Debian's package also enables a system-wide registry on :5000; the tests start their own on
# loopback, so one this run installed is turned off again (one the machine already had is left alone).
if [ "$registry_preinstalled" = 0 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
ensure_npm_packages
# A per-user cache outside the clone (scripts/test-agent-assets.mjs), keyed by the code that builds
# the images: a fresh clone of code already tested on this machine finds them ready.
ORCH_TEST_AGENT_ASSETS="$(node scripts/test-agent-assets.mjs --prune)"
export ORCH_TEST_AGENT_ASSETS
log "guest kernel, initramfs and images for the VM tests (orch-agent setup, cached in $ORCH_TEST_AGENT_ASSETS)"
AGENT_IMAGES=busybox,debian-12 npx --no-install orch-agent setup --data-dir "$ORCH_TEST_AGENT_ASSETS"

log "lint and format check (biome)"
npx --no-install biome check .
log "type check (tsc)"
npx --no-install tsc -p tsconfig.json
log "tests (vitest)"
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
status=0
npx --no-install vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
# One plain closing line, whatever the runner printed above it.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  // A file whose setup failed (beforeAll, import) has no failed test of its own: it counts too.
  const broken = r.testResults.filter((f) => f.status === "failed" && !f.assertionResults.some((a) => a.status === "failed")).length;
  const failed = r.numFailedTests + broken;
  console.log(`tests: ${r.numPassedTests} passed, ${failed} failed, ${r.numPendingTests + r.numTodoTests} skipped` + (broken ? ` (${broken} file(s) failed before their tests ran)` : ""));
' "$report" 2>/dev/null || true
exit "$status"
