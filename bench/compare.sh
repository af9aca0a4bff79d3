#!/usr/bin/env bash
# Runs benchmarks on an earlier revision and on this checkout back to back, so both see the same machine and
# load: `bench/compare.sh <revision> gateway ledger checkout`. BENCH_PAIRS=N (default 1) runs N pairs per benchmark,
# alternating which side goes first (a pair's second run can find the box busier or Postgres warmer, so one order
# favours one side). Results: bench-compare/<name>-{before,after}[-<pair>].json (the first pair without suffix).
# BENCH_BEFORE_PATCH=<file> applies a patch to the earlier revision first: a measurement the bench gained since
# (bench/gateway/harness-9ecd1cb.patch gives 9ecd1cb's gateway bench the server CPU per request and BENCH_INSTRUCTIONS).
set -euo pipefail
base=${1:?usage: bench/compare.sh <revision> <benchmark>...}; shift
pairs=${BENCH_PAIRS:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
before=$(mktemp -d /tmp/paygate-before.XXXXXX)
out="$root/bench-compare"; mkdir -p "$out"
git -C "$root" worktree add --detach "$before" "$base" >/dev/null
trap 'git -C "$root" worktree remove --force "$before"' EXIT
if [ -n "${BENCH_BEFORE_PATCH:-}" ]; then git -C "$before" apply "$(realpath "$BENCH_BEFORE_PATCH")"; fi
(cd "$before" && pnpm install --frozen-lockfile --reporter=silent)
for name in "$@"; do
  for pair in $(seq 1 "$pairs"); do
    order=$([ $((pair % 2)) = 1 ] && echo "before after" || echo "after before")
    suffix=$([ "$pair" = 1 ] && echo "" || echo "-$pair")
    for side in $order; do
      tree=$([ "$side" = before ] && echo "$before" || echo "$root")
      echo "=== $name $side (pair $pair) $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
      (cd "$tree" && PATH="$tree/node_modules/.bin:$PATH" tsx deploy/scripts/with-infra.ts tsx "bench/$name/run.ts" \
        > "$out/$name-$side$suffix.log" 2>&1)
      # BENCH_INSTRUCTIONS=<dir> (bench/gateway/instructions.ts): the gateway bench writes instruction counts instead.
      result=$([ -n "${BENCH_INSTRUCTIONS:-}" ] && echo "$name-instructions" || echo "$name")
      cp "$tree/bench/results/$result.json" "$out/$result-$side$suffix.json"
    done
  done
done
