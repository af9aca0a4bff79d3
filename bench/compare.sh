#!/usr/bin/env bash
# Runs benchmarks on an earlier revision and on this checkout back to back, so both see the same machine and
# load: `bench/compare.sh <revision> gateway ledger checkout`. Results: bench-compare/<name>-{before,after}.json.
set -euo pipefail
base=${1:?usage: bench/compare.sh <revision> <benchmark>...}; shift
root=$(cd "$(dirname "$0")/.." && pwd)
before=$(mktemp -d /tmp/paygate-before.XXXXXX)
out="$root/bench-compare"; mkdir -p "$out"
git -C "$root" worktree add --detach "$before" "$base" >/dev/null
trap 'git -C "$root" worktree remove --force "$before"' EXIT
(cd "$before" && pnpm install --frozen-lockfile --reporter=silent)
for name in "$@"; do
  for side in before after; do
    tree=$([ "$side" = before ] && echo "$before" || echo "$root")
    echo "=== $name $side $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$tree" && PATH="$tree/node_modules/.bin:$PATH" tsx deploy/scripts/with-infra.ts tsx "bench/$name/run.ts" \
      > "$out/$name-$side.log" 2>&1)
    cp "$tree/bench/results/$name.json" "$out/$name-$side.json"
  done
done
