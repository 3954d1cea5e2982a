#!/usr/bin/env bash
# ab.sh REV [bench flags...]: runs the bench with agentlock as the working
# tree has it and, beside it in the same rounds, as commit REV has it (row
# "al-before"), then prints agentlock ÷ al-before per table (median of the
# per-round ratios). Example, S2 against the commit before a change:
#
#   bench/ab.sh HEAD~1 -only s2 -rounds 15 -shuffle
#
# REV's tree is copied under the module path github.com/agentlock/lockbefore
# (its own internal packages with it) into a temporary directory, with a
# copy of this bench whose extra file sets beforeImpl. Nothing in the
# repository changes; results go to results/ab.json unless -out says.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
rev=$1
shift
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
git -C "$root" rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "ab.sh: no commit $rev" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/before"
git -C "$root" archive "$rev" | tar -x -C "$tmp/before"
rm -rf "$tmp/before/bench" "$tmp/before/extra" "$tmp/before/cmd" "$tmp/before/examples"
find "$tmp/before" \( -name '*.go' -o -name go.mod \) -print0 |
	xargs -0 sed -i 's#github\.com/agentlock/lock\b#github.com/agentlock/lockbefore#g'

cp -r "$root/bench" "$tmp/bench"
cd "$tmp/bench"
go mod edit -replace "github.com/agentlock/lock=$root" \
	-replace "github.com/agentlock/lock/extra/lockprom=$root/extra/lockprom" \
	-require github.com/agentlock/lockbefore@v0.0.0 \
	-replace "github.com/agentlock/lockbefore=$tmp/before"
cat >zz_before_gen.go <<'GO'
package main

import (
	"context"

	"github.com/redis/go-redis/v9"

	before "github.com/agentlock/lockbefore"
)

type beforeMutex struct{ l *before.Lock }

func (m beforeMutex) tryAcquire(ctx context.Context) (bool, error) { return m.l.TryAcquire(ctx) }
func (m beforeMutex) acquire(ctx context.Context) error            { return m.l.Acquire(ctx) }
func (m beforeMutex) release(ctx context.Context) error            { return m.l.Release(ctx) }

func init() {
	beforeImpl = &impl{name: beforeName, open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		var opts []before.Option
		if s.ttl > 0 {
			opts = append(opts, before.WithTTL(s.ttl))
		}
		c := before.NewClient(rdbs[0], opts...)
		return func(key string) mutex { return beforeMutex{l: c.NewLock(key)} }, func() { _ = c.Close() }
	}}
}
GO
out=()
case " $* " in *" -out "*|*" -out="*) ;; *) out=(-out "$root/bench/results/ab.json") ;; esac
mkdir -p "$root/bench/results"
GOFLAGS=-mod=mod go build -o "$tmp/bench.bin" .
"$tmp/bench.bin" "${out[@]}" "$@"
