#!/usr/bin/env bash
# test.sh runs the tests of every module in the repository, with the race
# detector, one module after another, and prints each module's wall time.
#
#   ./test.sh                  every module
#   ./test.sh . locktest       only these modules (their directories)
#
# A script rather than a go.work: each module keeps its own go.mod and
# go.sum, so the bench's peer libraries, Prometheus and OpenTelemetry never
# enter the root module's build list; CI builds with -mod=readonly, which a
# workspace would override; and the fault suite gets the longer timeout it
# needs without raising everyone else's.
#
# Real-Redis tests start their own redis-server processes on free loopback
# ports. Without redis-server they skip, unless LOCK_REQUIRE_REDIS=1 makes
# them fail (CI sets it).
set -euo pipefail
cd "$(dirname "$0")"

all=(. locktest)
for d in extra/*/; do [ -f "$d/go.mod" ] && all+=("${d%/}"); done
all+=(bench internal/faulttest)
if [ $# -gt 0 ]; then modules=("$@"); else modules=("${all[@]}"); fi

report=()
for m in "${modules[@]}"; do
  if [ ! -f "$m/go.mod" ]; then
    echo "test.sh: $m is not a module directory (one of: ${all[*]})" >&2
    exit 2
  fi
  timeout=10m
  [ "$m" = internal/faulttest ] && timeout=15m
  printf '\n=== go test -race ./... in %s\n' "$m"
  start=$SECONDS
  if ! (cd "$m" && go test -race -count=1 -timeout "$timeout" ./...); then
    echo "test.sh: FAIL in module $m after $((SECONDS - start))s" >&2
    exit 1
  fi
  report+=("$(printf '%-22s %4ds' "$m" $((SECONDS - start)))")
done

printf '\n=== all passed\n'
printf '%s\n' "${report[@]}"
printf '%-22s %4ds\n' total "$SECONDS"
