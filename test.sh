#!/usr/bin/env bash
# test.sh runs every module's tests with the race detector: the root module,
# locktest, extra/*, bench and internal/faulttest, then a few seconds of each
# root fuzz target. It stops at the first failing module, naming it, and
# prints each module's wall time at the end.
#
#   ./test.sh                    every module
#   ./test.sh locktest extra/lockprom   only the modules named (paths as listed)
#   ./test.sh fuzz               only the fuzz targets
#
# A script rather than a go.work: each module keeps its own go.mod, go.sum
# and dependency versions (a workspace would resolve them together and hide
# a go.sum that CI's -mod=readonly rejects), and each module gets its own
# timeout (internal/faulttest needs 15 minutes, the rest the default).
# Set LOCK_REQUIRE_REDIS=1 to make real-Redis tests fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")"

modules=(. locktest)
for d in extra/*/; do [ -f "$d/go.mod" ] && modules+=("${d%/}"); done
modules+=(bench internal/faulttest fuzz)

if [ $# -gt 0 ]; then modules=("$@"); fi

timings=()
report() {
  printf '\n=== wall time per module\n'
  for t in "${timings[@]}"; do printf '%s\n' "$t"; done
}
trap report EXIT

run_module() {
  local m=$1
  case "$m" in
    fuzz)
      for f in $(go test -list '^Fuzz' . | grep '^Fuzz' || true); do
        go test -run='^$' -fuzz="^${f}\$" -fuzztime=3s . >/dev/null
        echo "fuzzed $f"
      done ;;
    internal/faulttest)
      (cd "$m" && go test -race -count=1 -timeout 15m ./...) ;;
    *)
      [ -f "$m/go.mod" ] || { echo "no module at $m"; return 1; }
      (cd "$m" && go test -race -count=1 ./...) ;;
  esac
}

for m in "${modules[@]}"; do
  printf '\n=== test %s\n' "$m"
  start=$SECONDS
  if ! run_module "$m"; then
    timings+=("$(printf '%-20s %4ds  FAILED' "$m" $((SECONDS - start)))")
    printf '\nFAIL: module %s failed\n' "$m"
    exit 1
  fi
  timings+=("$(printf '%-20s %4ds' "$m" $((SECONDS - start)))")
done
printf '\nPASS: every module\n'
